"""Nadaraya–Watson kernel regression: attention pooling in its simplest form (d2l.ai §11.2,
Attention Pooling by Similarity).

Notation (shapes in comments): Q queries (test inputs), K keys per query (training inputs),
the values are the training targets. The attention weight of query x on key x_i is

    α(x, x_i) = softmax_i(-((x - x_i) w)² / 2),    f(x) = Σ_i α(x, x_i) y_i

(Nadaraya 1964; Watson 1964). w multiplies the distance, so it is the kernel's *inverse* width:
the Gaussian of d2l.ai §11.2.3 (Adapting Attention Pooling), exp(-(x - x_i)² / (2σ²)), has
w = 1/σ, and a larger w attends more locally. w = 1 is the non-parametric Gaussian kernel of
§11.2.2; learning w by gradient descent makes the pooling parametric. The current edition
tunes σ by hand on f(x) = 2 sin(x) + x; the learned w, the leave-one-out fit and the data
(f(x) = 2 sin(x) + x^0.8, 50 samples, noise N(0, 0.5)) are those of the previous edition,
d2l 0.17 §10.2 (classic.d2l.ai, "Attention Pooling: Nadaraya–Watson Kernel Regression").
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn

from seqlab.deprecation import renamed_kwargs
from seqlab.plotting import plot_lines
from seqlab.plotting_heatmaps import plot_attention


@renamed_kwargs(width="inverse_width")
def gaussian_attention(
    queries: Tensor, keys: Tensor, inverse_width: Tensor | float = 1.0
) -> Tensor:
    """Attention weights α(x, x_i) = softmax_i(-((x - x_i) w)² / 2), w = ``inverse_width``
    (1/σ of d2l.ai §11.2.3: a larger w, a narrower kernel). ``width=`` is its deprecated name.

    Shape:
        queries ``(Q,)``, keys ``(K,)`` shared or ``(Q, K)`` per query -> weights ``(Q, K)``.
    """
    diff = queries[:, None] - (keys[None, :] if keys.dim() == 1 else keys)  # (Q, K)
    return torch.softmax(-((diff * inverse_width) ** 2) / 2, dim=-1)  # (Q, K)


@renamed_kwargs(width="inverse_width")
def nadaraya_watson(
    queries: Tensor, keys: Tensor, values: Tensor, inverse_width: Tensor | float = 1.0
) -> tuple[Tensor, Tensor]:
    """Non-parametric attention pooling f(x) = Σ_i α(x, x_i) y_i with a Gaussian kernel of
    inverse width w = ``inverse_width`` (d2l.ai §11.2.2). ``width=`` is its deprecated name.

    Shape:
        queries ``(Q,)``, keys and values ``(K,)`` or ``(Q, K)`` -> predictions ``(Q,)``,
        weights ``(Q, K)``.
    """
    weights = gaussian_attention(queries, keys, inverse_width)  # (Q, K)
    values = values[None, :] if values.dim() == 1 else values  # (1|Q, K)
    return (weights * values).sum(-1), weights  # (Q,)


class NWKernelRegression(nn.Module):
    """Parametric Nadaraya–Watson regression with one learned inverse kernel width w = 1/σ
    (d2l 0.17 §10.2.4; d2l.ai §11.2.3 tunes σ by hand). ``init_width=`` is the deprecated name
    of ``init_inverse_width``."""

    @renamed_kwargs(init_width="init_inverse_width")
    def __init__(self, init_inverse_width: float = 1.0):
        super().__init__()
        self.w = nn.Parameter(torch.tensor([init_inverse_width]))  # w = 1/σ, d2l 0.17's name

    def forward(self, queries: Tensor, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Predictions and attention weights.

        Shape:
            queries ``(Q,)``, keys and values ``(K,)`` or ``(Q, K)`` -> ``(Q,)``, ``(Q, K)``.
        """
        return nadaraya_watson(queries, keys, values, self.w)


def target_function(x: Tensor) -> Tensor:
    """The regression target of d2l 0.17 §10.2.1, f(x) = 2 sin(x) + x^0.8."""
    return 2 * torch.sin(x) + x**0.8


def make_data(
    n_train: int = 50, noise: float = 0.5, seed: int = 0
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Sorted training inputs in [0, 5) with noisy targets (N(0, 0.5)), and the test grid.

    Shape:
        -> x_train ``(n,)``, y_train ``(n,)``, x_test ``(50,)``, y_truth ``(50,)``.
    """
    gen = torch.Generator().manual_seed(seed)
    x_train = torch.sort(torch.rand(n_train, generator=gen) * 5).values  # (n,)
    y_train = target_function(x_train) + noise * torch.randn(n_train, generator=gen)  # (n,)
    x_test = torch.arange(0, 5, 0.1)  # (50,)
    return x_train, y_train, x_test, target_function(x_test)


def leave_one_out(x: Tensor) -> Tensor:
    """Row i holds every element of ``x`` except x_i (keys/values for training).

    Shape:
        ``(n,) -> (n, n - 1)``.
    """
    n = x.shape[0]
    keep = ~torch.eye(n, dtype=torch.bool)  # (n, n)
    return x[None, :].expand(n, n)[keep].reshape(n, n - 1)  # (n, n - 1)


@renamed_kwargs(init_width="init_inverse_width")
def fit_parametric(
    x_train: Tensor,
    y_train: Tensor,
    epochs: int = 5,
    lr: float = 0.5,
    init_inverse_width: float = 1.0,
) -> tuple[NWKernelRegression, list[float]]:
    """Fit the inverse width w by full-batch SGD on the summed squared error, leave-one-out keys
    (as in d2l 0.17 §10.2.4). ``init_width=`` is the deprecated name of ``init_inverse_width``.

    Starts from w = 1, the non-parametric kernel (d2l 0.17 draws w from U(0, 1); near 0 the
    gradient vanishes, since the loss depends on w², and SGD can stall at a constant fit).
    """
    model = NWKernelRegression(init_inverse_width)
    keys, values = leave_one_out(x_train), leave_one_out(y_train)  # (n, n - 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(epochs):
        optimizer.zero_grad()
        pred, _ = model(x_train, keys, values)  # (n,)
        loss = ((pred - y_train) ** 2).sum()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return model, losses


def run_kernel_regression_demo(out_dir: str | Path, seed: int = 0) -> dict[str, float]:
    """Fit both estimators on d2l 0.17 §10.2's data; write two plots; return test metrics.

    Writes ``kernel_regression_fit.png`` (truth, both predictions, training points) and
    ``kernel_regression_attention.png`` (parametric weights, test queries × training keys).
    Returns the test MSE of each estimator against the noiseless truth, the learned inverse
    width w (``inverse_width``) and the final training loss.
    """
    out_dir = Path(out_dir)
    x_train, y_train, x_test, y_truth = make_data(seed=seed)
    pred_np, _ = nadaraya_watson(x_test, x_train, y_train)  # (50,)
    model, losses = fit_parametric(x_train, y_train)
    with torch.no_grad():
        pred_p, weights = model(x_test, x_train, y_train)  # (50,), (50, n)
    plot_lines(
        x_test,
        {
            "truth": y_truth,
            "non-parametric (w = 1)": pred_np,
            f"parametric (learned inverse width w = {model.w.item():.2f})": pred_p,
        },
        out_dir / "kernel_regression_fit.png",
        points=(x_train, y_train),
        title="Nadaraya–Watson kernel regression",
    )
    plot_attention(
        weights,
        out_dir / "kernel_regression_attention.png",
        title="Parametric attention weights",
        xlabel="Sorted training inputs (keys)",
        ylabel="Test inputs (queries)",
    )
    return {
        "mse_nonparametric": ((pred_np - y_truth) ** 2).mean().item(),
        "mse_parametric": ((pred_p - y_truth) ** 2).mean().item(),
        "inverse_width": model.w.item(),
        "train_loss": losses[-1],
    }
