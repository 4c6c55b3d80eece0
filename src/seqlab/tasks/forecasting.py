"""Forecasting real-valued sequences: autoregressive models, k-step-ahead prediction, RMSE/MAE
by horizon against the persistence baselines (d2l.ai §9.1).

Training minimises the mean squared error of the next value (on the scaled series); checkpoints
are chosen by validation RMSE. **k-step-ahead prediction** feeds the model's own predictions
back: x̂_{t+k} is computed from observations up to t only (see
:func:`seqlab.data.series.k_step_predictions`). The error at horizon h is measured on every target
step t of a split, predicted from the observations before t − h + 1.

A run directory holds ``series.json`` (window, scaling, season) besides the config and
checkpoints; :func:`load` needs nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.config import ExperimentConfig
from seqlab.data.series import (
    Scaler,
    Split,
    WindowBatches,
    check_values,
    chronological_split,
    k_step_predictions,
    load_sunspots,
    read_series_csv,
    sine_series,
    windows,
)
from seqlab.errors import CheckpointError, SeqlabError
from seqlab.io import atomic_write_json, read_format_json
from seqlab.models import build_model
from seqlab.objective import LossOutput, Selection
from seqlab.tasks.base import Experiment, Predictor, Run, load_weights

ARTEFACTS = ("series.json",)
#: horizons measured when none is asked for
DEFAULT_HORIZONS = 12
SERIES_FORMAT = "seqlab.series/1"


def load_series(cfg: ExperimentConfig) -> Tensor:
    """The configured series, unscaled, ``(N,)``."""
    d = cfg.data
    if d.dataset == "sine":
        return sine_series(d.length, cfg.train.seed)
    if d.dataset == "sunspots":
        return load_sunspots()
    assert d.path is not None
    return torch.tensor(read_series_csv(d.path, d.column, d.missing), dtype=torch.float32)


def split_of(cfg: ExperimentConfig, n: int) -> Split:
    d = cfg.data
    return chronological_split(n, d.val_fraction, d.test_fraction, d.window)


def horizon_errors(
    predict: Any, x: Tensor, window: int, targets: range, horizons: int
) -> dict[str, list[float]]:
    """RMSE and MAE at horizons 1 … K over the target steps of a split (unscaled ``x``).

    For horizon h and target t the prediction starts at t − h + 1 (observations before it only)."""
    rmse, mae = [], []
    for h in range(1, horizons + 1):
        ts = [t for t in targets if t - h + 1 >= window]
        if not ts:
            raise SeqlabError(f"no target step of the split can be predicted {h} steps ahead")
        pred = k_step_predictions(predict, x, window, h, [t - h + 1 for t in ts])[:, -1]  # (M,)
        err = pred - x[torch.tensor(ts)]
        rmse.append(float(err.pow(2).mean().sqrt()))
        mae.append(float(err.abs().mean()))
    return {"rmse": rmse, "mae": mae}


# ------------------------------------------------------------------------------ inference
class Forecaster(Predictor):
    """A trained forecaster: next values of a series, k steps ahead, errors by horizon."""

    task = "forecasting"
    capabilities: ClassVar[tuple[str, ...]] = ("forecast", "predict_next", "evaluate_split")
    commands: ClassVar[tuple[str, ...]] = ("forecast", "evaluate")

    def __init__(
        self, model: nn.Module, cfg: ExperimentConfig, scaler: Scaler, run: Run | None = None
    ) -> None:
        super().__init__(model, cfg, run)
        self.scaler, self.window = scaler, cfg.data.window

    @torch.no_grad()
    def predict_next(self, windows_: Tensor) -> Tensor:
        """Next value after each window, in the series' units. Shape: ``(B, τ) -> (B,)``."""
        device = next(self.model.parameters()).device
        z = self.scaler(windows_.float()).to(device)
        return self.scaler.invert(self.model(z).float().cpu())

    def forecast(self, history: Tensor | list[float], steps: int) -> list[float]:
        """The ``steps`` values after ``history`` (at least τ finite values, within
        ±:data:`~seqlab.data.series.MAX_ABS_VALUE`), each predicted from the previous
        predictions once the observations run out."""
        if isinstance(history, str) or not isinstance(history, Tensor | Sequence):
            raise SeqlabError(
                f"history must be a list (or tensor) of numbers, not {type(history).__name__}"
            )
        try:
            x = torch.as_tensor(history, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):
            raise SeqlabError("history must be a list (or tensor) of numbers") from None
        if x.dim() != 1:
            raise SeqlabError(f"history must be one series (1-D), got shape {tuple(x.shape)}")
        check_values(x.tolist(), "history")
        x = x.float()
        if len(x) < self.window:
            raise SeqlabError(
                f"a forecast needs at least τ = {self.window} past values, got {len(x)}"
            )
        if steps < 1:
            raise SeqlabError(f"steps must be >= 1, got {steps}")
        return k_step_predictions(self.predict_next, x, self.window, steps, [len(x)])[0].tolist()

    def evaluate_split(self, split: str = "test", horizons: int | None = None) -> dict[str, Any]:
        """RMSE and MAE at horizons 1 … ``horizons`` on a split of the configured series, for
        the model, persistence and (when ``data.season`` is set) seasonal persistence.

        ``horizons``: at most the split's number of target steps (and each needs τ observations
        before it); None = 12, or fewer on a shorter split. A larger value is refused at once.
        """
        x = load_series(self.cfg)
        parts = split_of(self.cfg, len(x))
        if split not in ("train", "val", "test"):
            raise SeqlabError(f"a series has train, val and test splits, not {split!r}")
        targets = parts.targets(split)
        # horizon h predicts target t from x up to t - h: beyond the split's own length it only
        # measures the earlier splits again, and it needs t - h + 1 >= τ
        most = min(len(targets), targets[-1] - self.window + 1) if len(targets) else 0
        if horizons is None:
            horizons = min(DEFAULT_HORIZONS, most)
        if isinstance(horizons, bool) or not isinstance(horizons, int) or not 1 <= horizons <= most:
            raise SeqlabError(
                f"horizons (--horizon) must be a whole number from 1 to {most}: the {split} split "
                f"of {self.cfg.data.dataset} has {len(targets)} target steps (window τ = "
                f"{self.window}), got {horizons!r}"
            )
        out: dict[str, Any] = {
            "split": split,
            "steps": len(targets),
            "horizons": list(range(1, horizons + 1)),
            "model": horizon_errors(self.predict_next, x, self.window, targets, horizons),
            "persistence": horizon_errors(lambda w: w[:, -1], x, self.window, targets, horizons),
        }
        season = self.cfg.data.season
        ts = [t for t in targets if season and t - season >= 0]
        if season and ts:
            # x̂_t = x_{t-s}: the same forecast at every horizon h ≤ s (it needs x up to t - s)
            idx = torch.tensor(ts)
            err = x[idx - season] - x[idx]
            rmse, mae = float(err.pow(2).mean().sqrt()), float(err.abs().mean())
            shown = min(horizons, season)
            out["seasonal_persistence"] = {
                "rmse": [rmse] * shown,
                "mae": [mae] * shown,
                "season": season,
                "steps": len(ts),
            }
        return out


# ------------------------------------------------------------------------------- training
def _save_series(path: Path, scaler: Scaler, cfg: ExperimentConfig) -> None:
    atomic_write_json(
        path,
        {
            "format": SERIES_FORMAT,
            "mean": scaler.mean,
            "std": scaler.std,
            "window": cfg.data.window,
        },
    )


def _load_scaler(path: Path, window: int) -> Scaler:
    data = read_format_json(path, SERIES_FORMAT, "series file")
    if data.get("window") != window:
        raise CheckpointError(
            f"{path}: written for window {data.get('window')}, the config says {window}"
        )
    return Scaler(float(data["mean"]), float(data["std"]))


def build_experiment(cfg: ExperimentConfig, run_dir: Path | None = None) -> Experiment:
    """Series, chronological split, scaling fitted on train, windows, the model."""
    d = cfg.data
    x = load_series(cfg)
    parts = split_of(cfg, len(x))
    if run_dir is not None:
        scaler = _load_scaler(Path(run_dir) / "series.json", d.window)
    else:
        scaler = Scaler.fit(x[: parts.val_start])
    z = scaler(x)
    train_x, train_y = windows(z, d.window, parts.targets("train"))
    val_x, val_y = windows(z, d.window, parts.targets("val"))
    batches = WindowBatches(train_x, train_y, d.batch_size, seed=cfg.train.seed)
    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg.model, window=d.window)

    def loss_fn(m: nn.Module, batch: tuple[Tensor, Tensor], state: Any) -> LossOutput:
        inputs, targets = batch
        return LossOutput(F.mse_loss(m(inputs).float(), targets), len(targets), None)

    @torch.no_grad()
    def evaluate(m: nn.Module) -> dict[str, float]:
        device = next(m.parameters()).device
        pred = m(val_x.to(device)).float().cpu()
        mse = float(F.mse_loss(pred, val_y))
        return {"val_loss": mse, "val_rmse": mse**0.5 * scaler.std}

    return Experiment(
        model=model,
        train_batches=batches,
        loss_fn=loss_fn,
        evaluate=evaluate,
        select=Selection("val_rmse", "min"),
        save_artefacts=lambda directory: _save_series(Path(directory) / "series.json", scaler, cfg),
        predictor=Forecaster(model, cfg, scaler),
        meta={"window": d.window},
        unit="ex",
        perplexity=False,
    )


def load(run: Run) -> Forecaster:
    """The trained forecaster of ``run`` (its scaling and checkpoint only)."""
    scaler = _load_scaler(run.file("series.json"), run.cfg.data.window)
    model = build_model(run.cfg.model, window=run.cfg.data.window)
    return Forecaster(load_weights(model, run), run.cfg, scaler, run)
