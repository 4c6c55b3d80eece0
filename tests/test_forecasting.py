"""Forecasting: windows and splits without leakage, k-step prediction, CSV input, the CLI."""

import json
import math
import shutil

import pytest
import torch

from cli_checks import fails, succeeds, write_yaml
from conftest import run_offline
from seqlab import load
from seqlab.config import ARConfig, config_from_dict
from seqlab.data.series import (
    MAX_ABS_VALUE,
    Scaler,
    chronological_split,
    k_step_predictions,
    parse_series_csv,
    read_series_csv,
    sine_series,
    windows,
)
from seqlab.errors import ConfigError, DataError, SeqlabError
from seqlab.experiment import train
from seqlab.models import build_model
from seqlab.tasks.forecasting import build_experiment, horizon_errors, load_series, split_of


def _series(n: int = 30) -> list[str]:
    return [f"{math.sin(i / 5):.6f}" for i in range(n)]


# ------------------------------------------------------------------- windows and splits
def test_windows_pair_the_previous_tau_values_with_the_target():
    x = torch.arange(20.0)
    inputs, targets = windows(x, 4, range(0, 10))
    assert targets.tolist() == list(range(4, 10))  # targets without a full window are left out
    for row, t in zip(inputs, targets, strict=True):
        assert row.tolist() == [t - 4, t - 3, t - 2, t - 1]


def test_chronological_split_has_no_leakage():
    n, tau = 100, 5
    split = chronological_split(n, 0.2, 0.1, tau)
    assert (split.val_start, split.test_start) == (70, 90)
    x = torch.arange(float(n))  # value = time step
    train_x, train_y = windows(x, tau, split.targets("train"))
    val_x, val_y = windows(x, tau, split.targets("val"))
    test_x, test_y = windows(x, tau, split.targets("test"))
    # training never sees a value of a later split, as input or as target
    assert train_x.max() < split.val_start and train_y.max() < split.val_start
    # a window belongs to the split of its target; its inputs only look back
    assert val_y.min() == split.val_start and val_y.max() < split.test_start
    assert test_y.min() == split.test_start and test_y.max() == n - 1
    assert (val_x < val_y[:, None]).all() and (test_x < test_y[:, None]).all()
    # every target step is used exactly once across the splits (after the first window)
    steps = torch.cat([train_y, val_y, test_y]).tolist()
    assert steps == list(range(tau, n))


def test_split_too_short_for_the_window_is_refused():
    with pytest.raises(DataError, match="too short for window τ = 8"):
        chronological_split(20, 0.3, 0.4, 8)


def test_scaling_is_fitted_on_the_training_part_only():
    cfg = config_from_dict(
        {
            "data": {"dataset": "sine", "length": 200, "window": 4, "test_fraction": 0.25},
            "model": {"arch": "ar", "hidden": 0},
        }
    )
    x = load_series(cfg)
    parts = split_of(cfg, len(x))
    scaler = build_experiment(cfg).predictor.scaler
    assert scaler == Scaler.fit(x[: parts.val_start])
    assert scaler != Scaler.fit(x)


# ------------------------------------------------------------------------- prediction
def test_k_step_prediction_feeds_back_its_own_outputs():
    x = torch.arange(10.0)
    x[6:] = float("nan")  # the future: must never be read

    seen = []

    def predict(w):  # next value = last value + 1, recording its inputs
        seen.append(w.clone())
        return w[:, -1] + 1

    out = k_step_predictions(predict, x, 3, 4, [6])
    assert out.tolist() == [[6.0, 7.0, 8.0, 9.0]]
    assert seen[0].tolist() == [[3.0, 4.0, 5.0]]
    assert seen[3].tolist() == [[6.0, 7.0, 8.0]]  # all three are its own predictions
    assert not any(torch.isnan(w).any() for w in seen)


def test_k_step_with_a_model_matches_one_step_at_k_1_and_differs_later():
    torch.manual_seed(0)
    model = build_model(ARConfig(hidden=8), window=4).eval()
    x = sine_series(100, seed=1)
    with torch.no_grad():

        def predict(w):
            return model(w)

        starts = list(range(10, 60))
        one = k_step_predictions(predict, x, 4, 1, starts)[:, 0]
        direct = predict(torch.stack([x[t - 4 : t] for t in starts]))
        torch.testing.assert_close(one, direct)
        three = k_step_predictions(predict, x, 4, 3, starts)
        # the second step is the model applied to a window ending in its own first prediction
        second = predict(
            torch.cat([x[torch.tensor(starts)[:, None] + torch.arange(-3, 0)], three[:, :1]], dim=1)
        )
        torch.testing.assert_close(three[:, 1], second)


def test_horizon_errors_of_persistence_by_hand():
    x = torch.tensor([0.0, 1.0, 3.0, 6.0, 10.0, 15.0])
    errors = horizon_errors(lambda w: w[:, -1], x, 2, range(4, 6), 2)
    # h = 1: x̂_4 = x_3 = 6, x̂_5 = x_4 = 10; h = 2: x̂_4 = x_2 = 3, x̂_5 = x_3 = 6
    assert errors["mae"] == pytest.approx([(4 + 5) / 2, (7 + 9) / 2])
    assert errors["rmse"] == pytest.approx([((16 + 25) / 2) ** 0.5, ((49 + 81) / 2) ** 0.5])


# -------------------------------------------------------------------------- CSV input
def write(tmp_path, text, name="s.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_csv_column_and_missing_values(tmp_path):
    path = write(tmp_path, "month,count,other\n1,1.0,9\n2,,9\n3,3.0,9\n4,NaN,9\n5,7,9\n")
    with pytest.raises(DataError, match=r"s\.csv:3: missing value in column 'count'"):
        read_series_csv(path, "count")
    assert read_series_csv(path, "count", "interpolate") == [1.0, 2.0, 3.0, 5.0, 7.0]
    assert read_series_csv(path, "count", "drop") == [1.0, 3.0, 7.0]
    assert read_series_csv(path) == [9.0] * 5  # default: the last column
    with pytest.raises(DataError, match=r"s\.csv:1: no column 'nope'.*'month', 'count'"):
        read_series_csv(path, "nope")


def test_a_missing_value_or_column_names_the_setting_of_whoever_reads_the_csv(
    tmp_path, tiny_runs, capsys
):
    """A training run's CSV is told data.missing / data.column, ``seqlab forecast --input``
    its options (a forecast takes no config overrides); following the advice works."""
    from seqlab.cli import main

    path = write(tmp_path, "v\n" + "".join(f"{t}\n" if t != 3 else "nan\n" for t in range(16)))
    fix = "fill it, or set {}: interpolate or drop"
    with pytest.raises(
        DataError, match=r"s\.csv:5: missing value .*" + fix.format(r"data\.missing")
    ):
        read_series_csv(path)
    with pytest.raises(DataError, match=r"no column 'x' in the header \('v'\); set data\.column "):
        read_series_csv(path, "x")
    argv = ["forecast", "--run", str(tiny_runs["fc"]), "--input", str(path), "--horizon", "2"]
    assert main(argv) == 2
    assert capsys.readouterr().err.endswith(fix.format("--missing") + "\n")
    assert main([*argv, "--column", "x"]) == 2
    assert "; set --column to one of them" in capsys.readouterr().err
    assert main([*argv, "--missing", "drop"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2  # the two forecast steps


def test_csv_bad_cells_name_file_and_line(tmp_path):
    with pytest.raises(DataError, match=r"b\.csv:3: 'abc' in column 'v' is not a number"):
        read_series_csv(write(tmp_path, "v\n1\nabc\n", "b.csv"))
    with pytest.raises(DataError, match=r"i\.csv:2: 'inf' in column 'v' is not finite"):
        read_series_csv(write(tmp_path, "v\ninf\n", "i.csv"))
    with pytest.raises(DataError, match="empty file"):
        read_series_csv(write(tmp_path, "", "e.csv"))
    with pytest.raises(DataError, match="no values in column 'v'"):
        read_series_csv(write(tmp_path, "v\n\n", "h.csv"))


def test_series_config_needs_a_path_and_a_forecasting_model():
    with pytest.raises(ConfigError, match="data.path is required with dataset"):
        config_from_dict({"data": {"dataset": "series"}, "model": {"arch": "ar"}})
    with pytest.raises(ConfigError, match="forecasting"):
        config_from_dict({"data": {"dataset": "sine"}, "model": {"arch": "rnn_lm"}})


# ------------------------------------------------------------------ trained run and CLI
@pytest.fixture(scope="module")
def sine_run(tmp_path_factory):
    cfg = config_from_dict(
        {
            "name": "sine-test",
            "data": {
                "dataset": "sine",
                "length": 300,
                "window": 4,
                "batch_size": 16,
                "val_fraction": 0.2,
                "test_fraction": 0.2,
                "season": 628,
            },
            "model": {"arch": "ar", "hidden": 0},
            "train": {"lr": 0.05, "epochs": 3, "log_every": 1000},
        }
    )
    run_dir = tmp_path_factory.mktemp("forecast") / "run"
    train(cfg, run_dir)
    return run_dir


def test_forecaster_forecast_is_k_step_prediction(sine_run):
    model = load(sine_run)
    assert model.task == "forecasting"
    x = sine_series(300, seed=0)
    values = model.forecast(x[:50], 5)
    torch.testing.assert_close(
        torch.tensor(values), k_step_predictions(model.predict_next, x, 4, 5, [50])[0]
    )
    with pytest.raises(SeqlabError, match="at least τ = 4 past values, got 3"):
        model.forecast([1.0, 2.0, 3.0], 2)


def test_linear_ar_learns_the_sine_better_than_persistence(sine_run):
    result = load(sine_run).evaluate_split("val", horizons=2)
    assert result["model"]["rmse"][0] < result["persistence"]["rmse"][0]
    assert "seasonal_persistence" not in result  # season 628 > the 300 steps


def test_forecast_and_evaluate_from_a_copied_run_without_data(sine_run, tmp_path):
    copy = tmp_path / "copied"
    shutil.copytree(sine_run, copy)
    csv_path = write(tmp_path, "t,value\n" + "".join(f"{i},{0.1 * i}\n" for i in range(12)))
    out = run_offline(
        [
            "forecast",
            "--run",
            str(copy),
            "--input",
            str(csv_path),
            "--horizon",
            "3",
            "--json",
            "--png",
            str(tmp_path / "f.png"),
        ],
        tmp_path,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["history"] == 12 and len(result["forecast"]) == 3
    expected = load(copy).forecast([0.1 * i for i in range(12)], 3)
    assert result["forecast"] == pytest.approx(expected, abs=1e-5)
    assert (tmp_path / "f.png").stat().st_size > 0
    # the sine is generated from the config: evaluation needs no data either
    out = run_offline(["evaluate", "--run", str(copy), "--horizon", "3", "--json"], tmp_path)
    assert out.returncode == 0, out.stderr
    scores = json.loads(out.stdout)
    assert scores["split"] == "test" and scores["horizons"] == [1, 2, 3]
    assert len(scores["model"]["rmse"]) == 3 and len(scores["persistence"]["mae"]) == 3


def test_forecast_cli_errors(sine_run, tmp_path):
    bad = write(tmp_path, "v\n1\nx\n", "bad.csv")
    out = run_offline(
        ["forecast", "--run", str(sine_run), "--input", str(bad), "--horizon", "2"], tmp_path
    )
    assert out.returncode != 0 and "bad.csv:3: 'x' in column 'v' is not a number" in out.stderr
    out = run_offline(["forecast", "--run", str(sine_run), "--horizon", "0"], tmp_path)
    assert out.returncode != 0 and "--horizon" in out.stderr
    out = run_offline(
        ["evaluate", "--run", str(sine_run), "--src", str(bad), "--ref", str(bad)], tmp_path
    )
    assert out.returncode != 0 and "a forecaster is scored on a --split" in out.stderr


@pytest.mark.parametrize(
    "text, problem",
    [
        ("value\n" + "\n".join(v.replace(".", ",") for v in _series()), "2 field"),  # 0,5
        ("t,value\n0,1\n1,2,3\n2,3\n3,4\n4,5\n", "3 field"),  # a ragged row
        ("value\n1\n2\n\n3\n4\n5\n", "blank line between values"),  # a lost time step
        ("value\n1\n2\n1_000\n4\n5\n", "not a number"),  # Python's digit grouping
    ],
)
def test_series_csv_is_read_as_written_or_refused(text, problem):
    with pytest.raises(DataError, match=problem):
        parse_series_csv(text, "s.csv")


def test_series_csv_blank_line_between_values_follows_missing_and_trailing_ones_are_ignored():
    assert parse_series_csv("value\n1\n\n3\n", "s.csv", missing="interpolate") == [1, 2, 3]
    assert parse_series_csv("value\n1\n\n3\n", "s.csv", missing="drop") == [1, 3]
    assert parse_series_csv("value\n1\n2\n3\n\n\n", "s.csv") == [1, 2, 3]


def test_forecast_that_diverges_is_refused_and_steps_are_bounded(tiny_runs):
    fc = load(tiny_runs["fc"])
    history = [math.sin(i / 5) for i in range(30)]
    values = fc.forecast(history, 3)
    assert len(values) == 3 and all(math.isfinite(v) for v in values)
    with torch.no_grad():  # a model that doubles the last value: fed back, it diverges
        for p in fc.model.parameters():
            p.zero_()
        [p for p in fc.model.parameters() if p.dim() == 2][-1][:, -1] = 2.0
    with pytest.raises(SeqlabError, match="forecast diverges"):
        fc.forecast(history, 200)
    for steps in (0, 10_001, 2.5, True):
        with pytest.raises(SeqlabError, match="steps must be a whole number from 1 to"):
            fc.forecast(history, steps)


def write_csv(path, text):
    path.write_text(text)
    return path


@pytest.mark.parametrize("cell", ["1e300", "-1e16", "inf", "-Infinity", "1e309"])
def test_series_values_must_be_finite_and_in_range(runs, tmp_path, capsys, cell):
    csv_path = write_csv(tmp_path / "s.csv", f"t,v\n0,1\n1,{cell}\n2,3\n3,4\n4,5\n")
    argv = ["forecast", "--run", runs / "fc", "--input", csv_path, "--horizon", "2"]
    fails(capsys, argv, f"{csv_path}:3", repr(cell))
    raw = {
        "data": {"dataset": "series", "path": str(csv_path), "window": 2},
        "model": {"arch": "ar"},
        "train": {"max_steps": 1},
    }
    cfg = write_yaml(tmp_path / "c.yaml", raw)
    fails(capsys, ["train", cfg, "--out", tmp_path / "r"], f"{csv_path}:3")
    assert not (tmp_path / "r").exists()
    ok = write_csv(tmp_path / "ok.csv", f"t,v\n0,1\n1,{MAX_ABS_VALUE}\n2,3\n3,4\n4,5\n")
    assert len(read_series_csv(ok)) == 5


def test_forecast_refuses_non_finite_history(runs):
    model = load(runs / "fc")
    for history in ([math.nan] * 30, [1.0, 2.0, math.inf, 4.0, 5.0], [1e300] * 8):
        with pytest.raises(SeqlabError, match="history: value"):
            model.forecast(history, 3)
    with pytest.raises(SeqlabError, match="list"):
        model.forecast("1,2,3,4,5", 3)
    values = model.forecast([0.1 * i for i in range(10)], 3)
    assert len(values) == 3 and all(math.isfinite(v) for v in values)
    assert values == model.forecast(torch.tensor([0.1 * i for i in range(10)]), 3)


def test_a_series_without_a_header_keeps_its_first_value(runs, tmp_path, capsys):
    values = [0.5, 0.7, 0.2, 0.9, 0.4, 0.8]
    bare = write_csv(tmp_path / "bare.csv", "".join(f"{v}\n" for v in values))
    headed = write_csv(tmp_path / "headed.csv", "value\n" + "".join(f"{v}\n" for v in values))
    two_cols = write_csv(tmp_path / "two.csv", "".join(f"{i},{v}\n" for i, v in enumerate(values)))
    assert read_series_csv(bare) == values == read_series_csv(headed) == read_series_csv(two_cols)
    base = ["forecast", "--run", runs / "fc", "--horizon", "2", "--json"]
    a = json.loads(succeeds(capsys, [*base, "--input", bare]).out)
    b = json.loads(succeeds(capsys, [*base, "--input", headed]).out)
    assert a["history"] == b["history"] == 6 and a["forecast"] == b["forecast"]
    fails(capsys, [*base, "--input", bare, "--column", "value"], f"{bare}:1", "no header")
    with pytest.raises(DataError, match="no column 'x'"):
        read_series_csv(headed, "x")


def test_evaluate_horizon_is_bounded_by_the_split(runs, capsys):
    base = ["evaluate", "--run", runs / "fc", "--json"]
    fails(capsys, [*base, "--horizon", "100000"], "--horizon", "from 1 to 40", "40 target steps")
    result = json.loads(succeeds(capsys, [*base, "--horizon", "40"]).out)
    assert result["horizons"][-1] == 40
    fc = load(runs / "fc")
    assert fc.evaluate_split("val", horizons=None)["horizons"] == list(range(1, 13))
    with pytest.raises(SeqlabError, match="horizons"):
        fc.evaluate_split("test", horizons=0)
