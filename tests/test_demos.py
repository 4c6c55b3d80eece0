"""``seqlab demo`` wrappers: files written, paths printed."""

from seqlab.demos.kernel_regression import kernel_regression_demo

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_kernel_regression_demo_writes_and_names_its_plots(tmp_path, capsys):
    out = tmp_path / "new" / "dir"
    metrics = kernel_regression_demo(out)
    printed = capsys.readouterr().out
    for name in ("kernel_regression_fit.png", "kernel_regression_attention.png"):
        path = out / name
        assert path.read_bytes()[:8] == PNG_MAGIC
        assert str(path) in printed
    from seqlab.analysis.kernel_regression import make_data

    truth = make_data(seed=0)[3]
    baseline = ((truth - truth.mean()) ** 2).mean().item()  # predicting the mean everywhere
    assert 0 < metrics["mse_parametric"] < baseline and 0 < metrics["mse_nonparametric"] < baseline
    assert (
        f"test MSE: non-parametric {metrics['mse_nonparametric']:.4f}, "
        f"parametric {metrics['mse_parametric']:.4f}"
    ) in printed
