"""The forecasting task's predictor (:class:`Forecaster`), report and experiment.

Training minimises the mean squared error of the next value (on the scaled series); checkpoints
are chosen by validation RMSE. **k-step-ahead prediction** feeds the model's own predictions
back: x̂_{t+k} is computed from observations up to t only (see
:func:`seqlab.data.series.k_step_predictions`). The error at horizon h is measured on every target
step t of a split, predicted from the observations before t − h + 1.

A run directory holds ``series.json`` (window, scaling, season) besides the config and
checkpoints; :meth:`Forecaster.load` needs nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.atomic import atomic_write_json, read_format_json
from seqlab.builtin_records import RUN_FILES
from seqlab.config import ExperimentConfig
from seqlab.data import readers
from seqlab.data.series import (
    MAX_ABS_VALUE,
    OPTION_SETTINGS,
    Scaler,
    Split,
    WindowBatches,
    check_values,
    chronological_split,
    k_step_predictions,
    read_series_csv,
    windows,
)
from seqlab.errors import CheckpointError, SeqlabError
from seqlab.models import build_model
from seqlab.objective import LossOutput, Selection
from seqlab.storage.outputs import FILE_RULE, api_output_file
from seqlab.tasks.base import Experiment, Predictor, Run, load_weights
from seqlab.tasks.forecasting.options import ForecastOptions
from seqlab.tasks.options import CommandOptions, Option, show_options
from seqlab.tasks.report import Prediction, Report

ARTEFACTS = RUN_FILES["forecasting"]
#: horizons measured when none is asked for
DEFAULT_HORIZONS = 12
SERIES_FORMAT = "seqlab.series/1"


def load_series(cfg: ExperimentConfig) -> Tensor:
    """The configured series, unscaled, ``(N,)``, from the dataset's reader
    (:func:`seqlab.data.readers.read`)."""
    return readers.read(cfg.data, cfg.train.seed)


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
@dataclass
class Forecast(Prediction):
    """The values predicted after a history (``source`` says where it came from)."""

    source: str
    history: list[float]
    values: list[float]

    def lines(self) -> list[str]:
        """``index<TAB>value``: the index each value would have in the series."""
        n = len(self.history)
        return [f"{n + step - 1}\t{value:.6g}" for step, value in enumerate(self.values, start=1)]

    def to_json(self) -> dict[str, Any]:
        return {"input": self.source, "history": len(self.history), "forecast": self.values}


#: the errors by horizon in a report: the model's and the baselines'
COMPARED = ("model", "persistence", "seasonal_persistence")


@dataclass
class ForecastReport(Report):
    """RMSE and MAE by horizon of the model and the persistence baselines."""

    def summary(self) -> str:
        s = self.scores
        shown = [n for n in COMPARED if n in s]
        lines = [
            f"{self.where}: {s['steps']} target steps ({self.checkpoint})",
            "horizon  " + "  ".join(f"{n:>20s}" for n in shown) + "   (RMSE)",
        ]
        for i, h in enumerate(s["horizons"]):
            cells = [s[n]["rmse"][i] if i < len(s[n]["rmse"]) else float("nan") for n in shown]
            lines.append(f"{h:7d}  " + "  ".join(f"{c:20.3f}" for c in cells))
        return "\n".join(lines)


class Forecaster(Predictor):
    """A trained forecaster: next values of a series, k steps ahead, errors by horizon."""

    task = "forecasting"
    kind = "forecasting"
    capabilities: ClassVar[tuple[str, ...]] = (
        "forecast",
        "predict_next",
        "predict",
        "evaluate",
    )
    commands: ClassVar[tuple[str, ...]] = ("forecast", "evaluate")
    options: ClassVar[tuple[Option, ...]] = (
        Option(
            "--horizon",
            "errors at 1 … K steps ahead, K at most the split's length (default 12, fewer on a "
            "shorter split; split default: test)",
            ("evaluate",),
            type="positive_int",
            metavar="K",
            dest="horizons",
        ),
        Option(
            "--png",
            f"draw RMSE by horizon into FILE: {FILE_RULE}",
            ("evaluate",),
            role="figure",
            metavar="FILE",
            dest="plot",
            figure="plot",
        ),
        Option(
            "--input",
            "one value per row, in the last column (or --column); a first row whose value is a "
            "number is data, else it is the header. Values must be finite, within ±1e15 "
            "(default: the run's configured series)",
            ("forecast",),
            role="cli",
            metavar="CSV",
        ),
        Option(
            "--png",
            f"draw the end of the series and the forecast into FILE: {FILE_RULE}",
            ("forecast",),
            role="figure",
            metavar="FILE",
            figure="plot",
        ),
        Option("--json", "print JSON", ("forecast",), type="flag", role="cli"),
    )
    #: ``forecast``'s options, one field each (--horizon, --column, --missing)
    command_options: ClassVar[dict[str, type[CommandOptions]]] = {"forecast": ForecastOptions}
    usage: ClassVar[dict[str, str]] = {
        "evaluate": "a forecaster is scored on a --split of its series (--horizon K steps ahead)"
    }

    def __init__(
        self, model: nn.Module, cfg: ExperimentConfig, scaler: Scaler, run: Run | None = None
    ) -> None:
        super().__init__(model, cfg, run)
        self.scaler, self.window = scaler, cfg.data.window

    @classmethod
    def load(cls, run: Run) -> Forecaster:
        """The trained forecaster of ``run`` (its scaling and checkpoint only)."""
        scaler = _load_scaler(run.file("series.json"), run.cfg.data.window)
        model = build_model(run.cfg.model, window=run.cfg.data.window)
        return cls(load_weights(model, run), run.cfg, scaler, run)

    @property
    def _name(self) -> str:
        return str(self.run.run_dir) if self.run is not None else self.cfg.model.arch

    @torch.no_grad()
    def predict_next(self, windows_: Tensor) -> Tensor:
        """Next value after each window, in the series' units. Shape: ``(B, τ) -> (B,)``."""
        device = next(self.model.parameters()).device
        z = self.scaler(windows_.float()).to(device)
        return self.scaler.invert(self.model(z).float().cpu())

    def forecast(
        self,
        history: Tensor | list[float],
        steps: int | None = None,
        options: ForecastOptions | None = None,
        **keywords: Any,
    ) -> list[float]:
        """The ``steps`` values after ``history`` (at least τ finite values, within
        ±:data:`~seqlab.data.series.MAX_ABS_VALUE`), each predicted from the previous
        predictions once the observations run out; ``options`` (a validated
        :class:`~seqlab.tasks.forecasting.options.ForecastOptions`) may give the steps instead,
        taken as they are; any other keyword is refused by name."""
        keywords = keywords if steps is None else {**keywords, "steps": steps}
        steps = self.options_of("forecast", options, keywords).steps
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
        values = k_step_predictions(self.predict_next, x, self.window, steps, [len(x)])[0]
        bad = [i for i, v in enumerate(values.tolist()) if not abs(v) <= MAX_ABS_VALUE]
        if bad:
            raise SeqlabError(
                f"the forecast diverges: value {bad[0] + 1} of {steps} is {values[bad[0]].item():g} "
                f"(beyond ±{MAX_ABS_VALUE:.0e}, or not a number), each prediction being fed back; "
                f"ask for a shorter --horizon (at most {bad[0]}) or use a better-fitting model"
            )
        return values.tolist()

    def predict(
        self,
        inputs: str | Path | Sequence[float] | Tensor | None = None,
        options: ForecastOptions | None = None,
        *,
        png: str | Path | None = None,
        force: bool = False,
        **keywords: Any,
    ) -> Forecast:
        """``seqlab forecast``: the next ``steps`` values after ``inputs``, a CSV file (its
        ``column``, default the last; ``missing`` values: ``error``, ``interpolate`` or
        ``drop``), the values themselves, or None for the run's own series; with ``png`` the
        end of the series and the forecast drawn there, by the rule of ``--png``
        (:func:`seqlab.storage.outputs.output_file`: a file seqlab did not write is refused
        before any work unless ``force``). The options are ``options`` (a validated
        :class:`~seqlab.tasks.forecasting.options.ForecastOptions`) or its fields as keyword
        arguments, checked once."""
        o: ForecastOptions = self.options_of("forecast", options, keywords)
        column, missing = o.column, o.missing
        if (column or missing) and not isinstance(inputs, str | Path):
            raise SeqlabError("--column and --missing describe an --input CSV")
        csv = {"--input": inputs} if isinstance(inputs, str | Path) else {}
        figure = api_output_file(png, "png", force, csv)  # checked now, before any work
        if inputs is None:
            history = load_series(self.cfg).tolist()
            source = f"the run's series ({self.cfg.data.dataset})"
        elif isinstance(inputs, str | Path):
            history = read_series_csv(inputs, column, missing or "error", OPTION_SETTINGS)
            source = str(inputs)
        else:
            history = torch.as_tensor(inputs).tolist() if isinstance(inputs, Tensor) else inputs
            source = "history"
        out = Forecast(source, list(history), self.forecast(history, options=o))
        if png:
            with figure:
                out.figures.append(self._plot_forecast(out, Path(png)))
        return out

    def _plot_forecast(self, out: Forecast, path: Path) -> Path:
        from seqlab.plotting import plot_series  # deferred: matplotlib

        n, steps = len(out.history), len(out.values)
        shown = min(n, max(4 * steps, 4 * self.window))
        plot_series(
            {
                "observed": (torch.arange(n - shown, n), torch.tensor(out.history[-shown:])),
                f"forecast ({steps} steps)": (
                    torch.arange(n - 1, n + steps),
                    torch.tensor([out.history[-1], *out.values]),
                ),
            },
            path,
            title=f"{self._name}: forecast after {out.source}",
            xlabel="time step",
            ylabel="value",
        )
        return path

    def evaluate(
        self,
        split: str | None = None,
        files: Mapping[str, str | Path] | None = None,
        *,
        horizons: int | None = None,
        plot: str | Path | None = None,
        force: bool = False,
    ) -> ForecastReport:
        """RMSE and MAE at horizons 1 … ``horizons`` on a split of the configured series
        (default ``test``), for the model, persistence and (when ``data.season`` is set)
        seasonal persistence; with ``plot`` the RMSE by horizon drawn there, by the rule of
        ``--png`` (:func:`seqlab.storage.outputs.output_file`: a file seqlab did not write is
        refused before any work unless ``force``).

        ``horizons``: at most the split's number of target steps (and each needs τ observations
        before it); None = 12, or fewer on a shorter split. A larger value is refused at once.
        """
        split, _ = self._source(split, files, "test")
        figure = api_output_file(plot, "plot", force)  # checked now, before any work
        if split not in ("train", "val", "test"):
            raise SeqlabError(
                f"a series has train, val and test splits, not {split!r}"
                + (" (--split dev is SST-2's)" if split == "dev" else "")
            )
        x = load_series(self.cfg)
        parts = split_of(self.cfg, len(x))
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
        scores: dict[str, Any] = {
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
            scores["seasonal_persistence"] = {
                "rmse": [rmse] * shown,
                "mae": [mae] * shown,
                "season": season,
                "steps": len(ts),
            }
        report = ForecastReport(self.checkpoint, {"split": split}, scores, device=str(self.device))
        report.check_finite()
        if plot:
            with figure:
                report.figures["plot"] = self._plot_horizons(report, Path(plot))
        return report

    def _plot_horizons(self, report: ForecastReport, path: Path) -> Path:
        from seqlab.plotting import plot_lines  # deferred: matplotlib

        s = report.scores
        horizons = torch.tensor(s["horizons"], dtype=torch.float32)
        plot_lines(
            horizons,
            {
                n.replace("_", " "): torch.tensor(s[n]["rmse"])
                for n in COMPARED
                if n in s and len(s[n]["rmse"]) == len(horizons)
            },
            path,
            title=f"{self._name}: {report.where} RMSE by horizon",
            xlabel="horizon k (steps ahead)",
            ylabel="RMSE",
        )
        return path


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
        select=SELECT,
        save_artefacts=lambda directory: _save_series(Path(directory) / "series.json", scaler, cfg),
        predictor=Forecaster(model, cfg, scaler),
        meta={"window": d.window},
        unit="ex",
        perplexity=False,
    )


#: forecasting chooses checkpoints by validation RMSE (in the series' units), lower is better
SELECT = Selection("val_rmse", "min")

show_options(Forecaster.predict, ForecastOptions)  # its keyword arguments are the model's fields
