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
    assert metrics["mse_parametric"] >= 0 and metrics["mse_nonparametric"] >= 0
    assert "test MSE" in printed
