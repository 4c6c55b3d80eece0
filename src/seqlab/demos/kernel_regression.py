"""Small self-contained demonstrations behind ``seqlab demo NAME --out DIR``."""

from __future__ import annotations

from pathlib import Path

from seqlab.analysis.kernel_regression import run_kernel_regression_demo
from seqlab.analysis.summary import claim, files_line, num, numbers_line


def kernel_regression_demo(out_dir: str | Path, seed: int = 0) -> dict[str, float]:
    """Nadaraya–Watson kernel regression (d2l.ai §11.2): write its two plots, print where they are.

    Fits the non-parametric (w = 1) and the parametric (learned inverse width w = 1/σ,
    d2l 0.17 §10.2.4) estimator on
    the noisy samples of 2 sin(x) + x^0.8 of d2l 0.17 §10.2.1, writes ``kernel_regression_fit.png``
    and ``kernel_regression_attention.png`` into ``out_dir`` (created if needed), prints the test
    errors (:func:`summary`), the machine and the two paths, and returns the metrics of
    :func:`seqlab.analysis.kernel_regression.run_kernel_regression_demo`.
    """
    out_dir = Path(out_dir)
    metrics = run_kernel_regression_demo(out_dir, seed=seed)
    print("\n".join(summary(metrics)))
    print(numbers_line("fp32"))
    names = ("kernel_regression_fit.png", "kernel_regression_attention.png")
    print(files_line([out_dir / name for name in names]))
    return metrics


def summary(metrics: dict[str, float]) -> list[str]:
    """The two fits' test errors (against the noiseless truth) and d2l's claim, rounded."""
    mse_np, mse_p = metrics["mse_nonparametric"], metrics["mse_parametric"]
    w = metrics["inverse_width"]
    return [
        f"non-parametric pooling (Gaussian kernel, w = 1): test MSE {num(mse_np)}",
        f"parametric pooling (learned inverse width w = {num(w)}): test MSE {num(mse_p)}",
        claim(
            "a learned inverse width sharpens the attention (w > 1) and fits the truth closer",
            w > 1 and mse_p < mse_np,
            f"w = {num(w)}; test MSE {num(mse_p)} vs {num(mse_np)} with w = 1",
        ),
    ]
