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

from seqlab.analysis.summary import claim, files_line, num, numbers_line, run_precision
from seqlab.atomic import atomic_write_json
from seqlab.config import load_config
from seqlab.data.series import k_step_predictions
from seqlab.demos.dates import clear_earlier_run
from seqlab.experiment import train
from seqlab.plotting import plot_lines, plot_series
from seqlab.tasks import load
from seqlab.tasks.forecasting import load_series, split_of

CONFIG = "sine-mlp"
STEPS = (1, 4, 16, 64)


def noise_rmse(x: torch.Tensor, steps: range) -> float:
    """RMSE of the noise 0.2 ε_t of x_t = sin(0.01 t) + 0.2 ε_t (t = 1 … N, at index t − 1) over
    ``steps``: no forecast of x_t can do better on average (the floor of ``forecast_horizons``).

    Shape: ``(N,) -> scalar``.
    """
    idx = torch.tensor(list(steps))
    return float((x[idx] - torch.sin(0.01 * (idx + 1).float())).pow(2).mean().sqrt())


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
    splits = {  # marked on the series figures
        f"training data ends (t = {parts.val_start})": parts.val_start - 0.5,
        f"test data starts (t = {parts.test_start})": parts.test_start - 0.5,
    }

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
        vlines=splits,
    )

    # k-step-ahead: x̂_{t} predicted from observations up to t - k, for every t that allows it
    last_k = max(STEPS)
    targets = torch.arange(tau + last_k - 1, n)  # (M,)
    curves = {}
    for k in STEPS:
        preds = k_step_predictions(model.predict_next, x, tau, k, (targets - k + 1).tolist())
        curves[f"{k}-step preds"] = (targets, preds[:, -1])
    plot_series(
        curves, out_dir / "forecast_k_steps.png", title="k-step-ahead predictions", vlines=splits
    )

    errors = model.evaluate("test", horizons=last_k)
    horizons = torch.tensor(errors["horizons"], dtype=torch.float32)
    floor = noise_rmse(x, parts.targets("test"))
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
        hlines={f"noise floor: RMSE of the noise on the test steps, {floor:.3f}": floor},
        ymin=0.0,
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
    result["precision"], result["machine"] = run_precision([run_dir])
    atomic_write_json(out_dir / "forecasting.json", result)
    for line in summary(result, start_t):
        log(line)
    log(numbers_line(result["precision"], result["machine"]))
    log(files_line(result["figures"], out_dir / "forecasting.json"))
    return result


def summary(result: dict[str, Any], start_t: int) -> list[str]:
    """One sentence per horizon and d2l.ai §9.1.4's claims, rounded for reading. Predictions
    "get worse" with k when the test RMSE never falls from one horizon to the next."""
    by_k = result["test_rmse_by_horizon"]
    lines = []
    for k, r in by_k.items():
        ahead = "better" if r["model"] < r["persistence"] else "worse"
        lines.append(
            f"{k} step{'s' if k != '1' else ''} ahead: test RMSE {num(r['model'])}, {ahead} than "
            f"persistence x̂_t = x_(t−{k}) at {num(r['persistence'])}"
            + (" (the noise alone gives 0.2)" if k == "1" else "")
        )
    model = [r["model"] for r in by_k.values()]
    first, last = next(iter(by_k)), list(by_k)[-1]
    lines.append(
        claim(
            "k-step-ahead predictions get worse as k grows (errors compound)",
            all(a <= b for a, b in zip(model, model[1:], strict=False)),
            f"test RMSE {num(model[0])} at k = {first} to {num(model[-1])} at k = {last}",
        )
    )
    lines.append(
        f"fed its own outputs from step {start_t} on, the prediction decays: RMSE "
        f"{num(result['multistep_rmse_from_train_end'])} there, against "
        f"{num(result['one_step_rmse_all'])} for 1-step predictions over the whole series"
    )
    return lines
