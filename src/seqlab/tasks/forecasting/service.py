"""The forecasting task served: ``POST /forecast`` (the next values after a series given as
values or as a CSV's text), declared once as :data:`SERVICE`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, PositiveInt

from seqlab.data.series import CsvSettings, parse_series_csv
from seqlab.serve.limits import check
from seqlab.serve.service import Handler, InputError, Job, Request, Service, run_each

#: how CSV errors name the request's fields
CSV_FIELDS = CsvSettings('"column" in the request', '"missing" in the request')


class ForecastRequest(Request):
    history: list[float] | None = Field(None, description="past values, oldest first")
    csv: str | None = Field(None, description="or a CSV file's text: a header, one row per step")
    column: str | None = Field(None, description="the CSV column (default: the last)")
    missing: Literal["error", "interpolate", "drop"] = Field(
        "error", description="empty or NaN CSV cells"
    )
    steps: PositiveInt = Field(description="values to predict")


class ForecastResponse(BaseModel):
    model: str
    window: int
    history: list[float] = Field(description="the values read (from history or the CSV)")
    forecast: list[float]


@dataclass
class ForecastWork:
    history: list[float] | None
    csv: str | None
    column: str | None
    missing: str
    steps: int


class ForecastHandler(Handler):
    """``POST /forecast``: the next values after a series (values, or a CSV's text)."""

    def details(self) -> dict[str, Any]:
        return {"input": "series", "window": int(self.predictor.window)}

    def prepare(self, request: ForecastRequest) -> tuple[ForecastWork, int]:
        if (request.history is None) == (request.csv is None):
            raise InputError("give either history (a list of numbers) or csv (a CSV's text)")
        check(request.steps, self.limits, "max_steps", "steps")
        if request.history is not None:
            check(len(request.history), self.limits, "max_history", "the history's length", 413)
            if not all(math.isfinite(v) for v in request.history):
                raise InputError("history holds a value that is not a finite number")
        else:
            assert request.csv is not None
            size = len(request.csv.encode("utf-8"))
            check(size, self.limits, "max_upload_bytes", "the CSV's size in bytes", 413)
        work = ForecastWork(
            request.history, request.csv, request.column, request.missing, request.steps
        )
        return work, 1

    def run(self, jobs: Sequence[Job]) -> list[Any]:
        return run_each(jobs, self._forecast)

    def _forecast(self, w: ForecastWork) -> ForecastResponse:
        history = w.history
        if history is None:
            assert w.csv is not None
            history = parse_series_csv(w.csv, "csv", w.column, w.missing, CSV_FIELDS)
            check(len(history), self.limits, "max_history", "the CSV's rows", 413)
        return ForecastResponse(
            model=self.name,
            window=int(self.predictor.window),
            history=list(history),
            forecast=self.predictor.forecast(history, w.steps),
        )


SERVICE = Service(
    route="/forecast",
    request=ForecastRequest,
    response=ForecastResponse,
    handler=ForecastHandler,
    summary="Forecast a series",
    panel=Path(__file__).with_name("panel.js"),
)
