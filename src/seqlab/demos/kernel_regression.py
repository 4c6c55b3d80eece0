"""Small self-contained demonstrations behind ``seqlab demo NAME --out DIR``."""

from __future__ import annotations

from pathlib import Path

from seqlab.analysis.kernel_regression import run_kernel_regression_demo


def kernel_regression_demo(out_dir: str | Path, seed: int = 0) -> dict[str, float]:
    """Nadaraya–Watson kernel regression (d2l.ai §11.2): write its two plots, print where they are.

    Fits the non-parametric (w = 1) and the parametric (learned w, d2l 0.17 §10.2.4) estimator on
    the noisy samples of 2 sin(x) + x^0.8 of d2l 0.17 §10.2.1, writes ``kernel_regression_fit.png``
    and ``kernel_regression_attention.png`` into ``out_dir`` (created if needed), prints the test
    errors and the two paths, and returns the metrics of
    :func:`seqlab.analysis.kernel_regression.run_kernel_regression_demo`.
    """
    out_dir = Path(out_dir)
    metrics = run_kernel_regression_demo(out_dir, seed=seed)
    print(
        f"test MSE: non-parametric {metrics['mse_nonparametric']:.4f}, "
        f"parametric {metrics['mse_parametric']:.4f} (learned width w = {metrics['width']:.3f})"
    )
    for name in ("kernel_regression_fit.png", "kernel_regression_attention.png"):
        print(f"wrote {out_dir / name}")
    return metrics
