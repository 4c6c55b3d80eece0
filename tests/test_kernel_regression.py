"""Nadaraya–Watson kernel regression (attention pooling) and its demo."""

import pytest
import torch

from seqlab.analysis.kernel_regression import (
    NWKernelRegression,
    gaussian_attention,
    leave_one_out,
    make_data,
    nadaraya_watson,
    run_kernel_regression_demo,
    target_function,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_weights_are_a_gaussian_kernel_normalised_per_query():
    x_train = torch.tensor([0.0, 1.0, 3.0])
    queries = torch.tensor([0.5, 2.0])
    w = gaussian_attention(queries, x_train)
    kernel = torch.exp(-((queries[:, None] - x_train[None]) ** 2) / 2)
    torch.testing.assert_close(w, kernel / kernel.sum(-1, keepdim=True))
    torch.testing.assert_close(w.sum(-1), torch.ones(2))


def test_prediction_is_the_weighted_average_of_values():
    x, y = torch.linspace(0, 4, 9), torch.randn(9)
    pred, w = nadaraya_watson(torch.tensor([1.3, 2.2]), x, y)
    torch.testing.assert_close(pred, w @ y)
    assert ((pred >= y.min()) & (pred <= y.max())).all()  # a convex combination


@pytest.mark.parametrize("inverse_width", [0.1, 1.0, 30.0])
def test_width_controls_locality(inverse_width):
    x, y = torch.arange(5.0), torch.tensor([0.0, 10.0, 20.0, 30.0, 40.0])
    pred, w = NWKernelRegression(inverse_width)(torch.tensor([2.0]), x, y)
    assert w.argmax().item() == 2
    if inverse_width == 30.0:  # a sharp kernel returns the nearest value
        torch.testing.assert_close(pred, torch.tensor([20.0]))
    if inverse_width == 0.1:  # a flat kernel returns nearly the mean
        torch.testing.assert_close(pred, y.mean()[None], atol=0.1, rtol=0)


def test_leave_one_out_keys_exclude_the_query_itself():
    x = torch.tensor([1.0, 2.0, 3.0, 4.0])
    keys = leave_one_out(x)
    assert keys.tolist() == [[2, 3, 4], [1, 3, 4], [1, 2, 4], [1, 2, 3]]


def test_data_matches_d2l_0_17():
    x_train, y_train, x_test, y_truth = make_data(seed=3)
    assert x_train.shape == (50,) and (x_train[1:] >= x_train[:-1]).all()
    assert x_train.min() >= 0 and x_train.max() < 5
    torch.testing.assert_close(x_test, torch.arange(0, 5, 0.1))
    torch.testing.assert_close(y_truth, 2 * torch.sin(x_test) + x_test**0.8)
    noise = y_train - target_function(x_train)
    assert 0.3 < noise.std().item() < 0.7  # N(0, 0.5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_demo_fits_and_writes_plots(tmp_path, seed):
    """Bounds: the noise variance σ² = 0.25, Var(truth on the grid) = 0.90 (a constant guess).

    The σ = 1 Gaussian kernel damps 2 sin(x) by e^{-1/2} (residual amplitude 0.79, MSE ≈ 0.31
    inside, more at the edges), so non-parametric MSE ≈ 0.35–0.55 over seeds: require < 0.6.
    The learned width (≈ 10–20, a kernel narrower than the 0.1 point spacing) averages a few
    nearest samples: it must beat σ², the error of returning the single nearest noisy sample,
    and the w = 1 estimator (parametric MSE ≈ 0.06–0.21 over seeds 0–11).
    """
    metrics = run_kernel_regression_demo(tmp_path, seed=seed)
    _, _, _, y_truth = make_data(seed=seed)
    assert metrics["mse_nonparametric"] < 0.6 < y_truth.var().item()
    assert metrics["mse_parametric"] < 0.25
    assert metrics["mse_parametric"] < metrics["mse_nonparametric"]
    assert metrics["inverse_width"] > 1.0
    for name in ("kernel_regression_fit.png", "kernel_regression_attention.png"):
        assert (tmp_path / name).read_bytes()[:8] == PNG_MAGIC
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "kernel_regression_attention.png",
        "kernel_regression_fit.png",
    ]  # no temporary files left behind


def test_trained_attention_rows_sum_to_one():
    x_train, y_train, x_test, _ = make_data()
    model = NWKernelRegression(7.0)
    _, w = model(x_test, x_train, y_train)
    assert w.shape == (50, 50)
    torch.testing.assert_close(w.sum(-1), torch.ones(50))
    assert (w >= 0).all()


def test_w_is_an_inverse_width_and_the_old_keyword_still_works():
    """w multiplies the distance: w = 1/σ of d2l.ai §11.2.3's exp(-(x - x_i)² / (2σ²)), so a
    larger w is a narrower kernel; ``width=`` and ``init_width=`` still work, with a warning."""
    x, queries = torch.tensor([0.0, 1.0, 3.0]), torch.tensor([0.5, 2.0])
    sigma = 0.4
    kernel = torch.exp(-((queries[:, None] - x[None]) ** 2) / (2 * sigma**2))
    weights = gaussian_attention(queries, x, inverse_width=1 / sigma)
    torch.testing.assert_close(weights, kernel / kernel.sum(-1, keepdim=True))
    narrow = gaussian_attention(queries, x, inverse_width=3.0).max(-1).values
    assert (narrow > gaussian_attention(queries, x, inverse_width=1.0).max(-1).values).all()
    y = torch.tensor([1.0, 2.0, 4.0])
    with pytest.warns(
        DeprecationWarning, match=r"width=\.\.\.\) is deprecated; use inverse_width="
    ):
        old, _ = nadaraya_watson(queries, x, y, width=2.5)
    torch.testing.assert_close(old, nadaraya_watson(queries, x, y, inverse_width=2.5)[0])
    with pytest.warns(DeprecationWarning, match="use init_inverse_width="):
        assert NWKernelRegression(init_width=7.0).w.item() == 7.0
    with pytest.raises(TypeError, match="got both"):
        nadaraya_watson(queries, x, y, width=1.0, inverse_width=2.0)
