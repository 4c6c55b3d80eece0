"""``seqlab demo forecasting``: d2l.ai §9.1's autoregressive model on a noisy sine, every figure.

Trains ``sine-mlp`` (x_t = sin(0.01 t) + 0.2 ε, an MLP on the last τ = 4 values, trained on the
first 600 steps), then draws the figures of d2l.ai §9.1.4 (Prediction):

- ``forecast_data.png``: the series, the 1-step-ahead predictions everywhere, and the multi-step
  prediction started at the end of training that feeds back its own outputs and decays to a
  flat line (the book's figure of multistep predictions failing);
- ``forecast_k_steps.png``: k-step-ahead predictions for k = 1, 4, 16, 64 over the same steps;
- ``forecast_horizons.png``: test RMSE against the horizon k, with the persistence baseline.

Numbers go to ``forecasting.json``; the trained run is ``OUT/sine-mlp``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from seqlab import load
from seqlab.config import load_config
from seqlab.data.series import k_step_predictions
from seqlab.demos.dates import clear_earlier_run
from seqlab.experiment import train
from seqlab.io import atomic_write_json
from seqlab.plotting import plot_lines, plot_series
from seqlab.tasks.forecasting import load_series, split_of

CONFIG = "sine-mlp"
STEPS = (1, 4, 16, 64)


def run_forecasting_demo(out_dir: str | Path, threads: int = 0, log=print) -> dict[str, Any]:
    out_dir = Path(out_dir)
    run_dir = out_dir / CONFIG
    clear_earlier_run(run_dir)
    cfg = load_config(CONFIG, [f"train.threads={threads}"] if threads else [])
    log(
        f"== training {CONFIG}: AR(τ={cfg.data.window}) MLP on a noisy sine of {cfg.data.length} =="
    )
    start = time.monotonic()
    train(cfg, run_dir)
    seconds = time.monotonic() - start
    model = load(run_dir)
    x = load_series(cfg)  # (N,)
    tau, n = cfg.data.window, len(x)
    parts = split_of(cfg, n)
    steps = torch.arange(n)

    # one-step-ahead everywhere, multi-step from the end of training on
    one = k_step_predictions(model.predict_next, x, tau, 1, list(range(tau, n)))[:, 0]  # (N-τ,)
    start_t = parts.val_start
    multi = k_step_predictions(model.predict_next, x, tau, n - start_t, [start_t])[0]  # (N-t0,)
    plot_series(
        {
            "data": (steps, x),
            "1-step preds": (steps[tau:], one),
            f"multistep preds (from step {start_t})": (steps[start_t:], multi),
        },
        out_dir / "forecast_data.png",
        title="AR(4) MLP on sin(0.01 t) + noise: 1-step vs feeding back its own outputs",
    )

    # k-step-ahead: x̂_{t} predicted from observations up to t - k, for every t that allows it
    last_k = max(STEPS)
    targets = torch.arange(tau + last_k - 1, n)  # (M,)
    curves = {}
    for k in STEPS:
        preds = k_step_predictions(model.predict_next, x, tau, k, (targets - k + 1).tolist())
        curves[f"{k}-step preds"] = (targets, preds[:, -1])
    plot_series(curves, out_dir / "forecast_k_steps.png", title="k-step-ahead predictions")

    errors = model.evaluate("test", horizons=last_k)
    horizons = torch.tensor(errors["horizons"], dtype=torch.float32)
    plot_lines(
        horizons,
        {
            "AR(4) MLP": torch.tensor(errors["model"]["rmse"]),
            "persistence x̂_t = x_{t-k}": torch.tensor(errors["persistence"]["rmse"]),
        },
        out_dir / "forecast_horizons.png",
        title="test RMSE by horizon (noise σ = 0.2 is the floor)",
        xlabel="horizon k",
        ylabel="RMSE",
    )
    result = {
        "config": CONFIG,
        "train_seconds": round(seconds, 1),
        "one_step_rmse_all": float((one - x[tau:]).pow(2).mean().sqrt()),
        "multistep_rmse_from_train_end": float((multi - x[start_t:]).pow(2).mean().sqrt()),
        "test_rmse_by_horizon": {
            str(k): {
                "model": errors["model"]["rmse"][k - 1],
                "persistence": errors["persistence"]["rmse"][k - 1],
            }
            for k in STEPS
        },
        "figures": [
            str(out_dir / f)
            for f in ("forecast_data.png", "forecast_k_steps.png", "forecast_horizons.png")
        ],
    }
    atomic_write_json(out_dir / "forecasting.json", result)
    for k in STEPS:
        r = result["test_rmse_by_horizon"][str(k)]
        log(
            f"test RMSE {k:2d} steps ahead: model {r['model']:.3f}  persistence {r['persistence']:.3f}"
        )
    log(f"figures: {', '.join(result['figures'])}; numbers: {out_dir / 'forecasting.json'}")
    return result
