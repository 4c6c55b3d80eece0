"""The forecasting task served: ``POST /forecast`` (the next values after a series given as
values or as a CSV's text), declared once as :data:`SERVICE`.

The request body is ``seqlab forecast``'s options model
(:class:`~seqlab.tasks.forecasting.options.ForecastOptions`: ``steps``, ``column``, ``missing``)
and the request's own fields (the series): validated once, when parsed, and handed to the
predictor as that model."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from seqlab.data.series import CsvSettings, parse_series_csv
from seqlab.serving.limits import check
from seqlab.serving.service import (
    InputError,
    OptionsHandler,
    Request,
    Service,
    answer_each,
)
from seqlab.tasks.forecasting.options import ForecastOptions
from seqlab.tasks.forecasting.task import Forecaster

#: how CSV errors name the request's fields
CSV_FIELDS = CsvSettings('"column" in the request', '"missing" in the request')


def options_model() -> type[ForecastOptions]:
    """The options ``POST /forecast`` takes: those of ``seqlab forecast``
    (:attr:`seqlab.tasks.base.Predictor.command_options`)."""
    return Forecaster.command_options["forecast"]  # type: ignore[return-value]


class ForecastRequest(Request, ForecastOptions):
    """The series (``history`` or ``csv``), and the fields of
    :class:`~seqlab.tasks.forecasting.options.ForecastOptions`."""

    history: list[float] | None = Field(None, description="past values, oldest first")
    csv: str | None = Field(None, description="or a CSV file's text: a header, one row per step")


class ForecastResponse(BaseModel):
    model: str
    window: int
    history: list[float] = Field(description="the values read (from history or the CSV)")
    forecast: list[float]


class ForecastHandler(OptionsHandler):
    """``POST /forecast``: the next values after a series (values, or a CSV's text); the
    generic handler, with the series as its inputs."""

    command = "forecast"
    limited: ClassVar[Mapping[str, str]] = {"steps": "max_steps"}

    def details(self) -> dict[str, Any]:
        return {"input": "series", "window": int(self.predictor.window)}

    def inputs(self, request: ForecastRequest) -> tuple[Any, int]:
        """``history`` (checked) or ``csv`` (its size checked; read on the worker)."""
        if (request.history is None) == (request.csv is None):
            raise InputError("give either history (a list of numbers) or csv (a CSV's text)")
        if request.history is not None:
            check(len(request.history), self.limits, "max_history", "the history's length", 413)
            if not all(math.isfinite(v) for v in request.history):
                raise InputError("history holds a value that is not a finite number")
            return request.history, 1
        size = len(request.csv.encode("utf-8"))  # type: ignore[union-attr]
        check(size, self.limits, "max_upload_bytes", "the CSV's size in bytes", 413)
        return request.csv, 1

    def check(self, inputs: Any, options: ForecastOptions) -> None:
        self.check_limited(options)

    def answer(self, inputs: list[Any], options: ForecastOptions) -> list[Any]:
        """Each series forecast on its own (one may diverge alone)."""
        return answer_each(inputs, lambda series: self._forecast(series, options))

    def _forecast(self, series: list[float] | str, options: ForecastOptions) -> ForecastResponse:
        history = series
        if isinstance(series, str):  # a CSV's text
            missing = options.missing or "error"
            history = parse_series_csv(series, "csv", options.column, missing, CSV_FIELDS)
            check(len(history), self.limits, "max_history", "the CSV's rows", 413)
        return ForecastResponse(
            model=self.name,
            window=int(self.predictor.window),
            history=list(history),
            forecast=self.predictor.forecast(history, options=options),
        )


SERVICE = Service(
    route="/forecast",
    request=ForecastRequest,
    response=ForecastResponse,
    handler=ForecastHandler,
    summary="Forecast a series",
    panel=Path(__file__).with_name("panel.js"),
    options=options_model,
)
