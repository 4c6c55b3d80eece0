"""Forecasting real-valued sequences: autoregressive models, k-step-ahead prediction, RMSE/MAE
by horizon against the persistence baselines (d2l.ai §9.1).

Training minimises the mean squared error of the next value (on the scaled series); checkpoints
are chosen by validation RMSE. **k-step-ahead prediction** feeds the model's own predictions
back: x̂_{t+k} is computed from observations up to t only (see
:func:`seqlab.data.series.k_step_predictions`). The error at horizon h is measured on every target
step t of a split, predicted from the observations before t − h + 1.

A run directory holds ``series.json`` (window, scaling, season) besides the config and
checkpoints; :meth:`Forecaster.load` needs nothing else.

**Layout**: :mod:`~seqlab.tasks.forecasting.task` (the predictor, its report, the experiment),
:mod:`~seqlab.tasks.forecasting.service` (``POST /forecast``) and ``panel.js`` (the page's
panel); the task is declared once, below (:data:`TASK`).
"""

from seqlab import catalog
from seqlab.tasks.forecasting.options import MAX_FORECAST_STEPS, ForecastOptions
from seqlab.tasks.forecasting.service import SERVICE
from seqlab.tasks.forecasting.task import (
    ARTEFACTS,
    SELECT,
    Forecast,
    Forecaster,
    ForecastReport,
    build_experiment,
    horizon_errors,
    load_series,
    split_of,
)

TASK = catalog.register_task(
    catalog.TaskSpec(
        "forecasting",
        build_experiment,
        (Forecaster,),
        SELECT,
        frozenset(ARTEFACTS),
        service=SERVICE,
        summary="the next values of a series",
    )
)

__all__ = [
    "ARTEFACTS",
    "MAX_FORECAST_STEPS",
    "SELECT",
    "SERVICE",
    "TASK",
    "Forecast",
    "ForecastOptions",
    "ForecastReport",
    "Forecaster",
    "build_experiment",
    "horizon_errors",
    "load_series",
    "split_of",
]
