"""The options of ``seqlab forecast``, declared once (:class:`ForecastOptions`): the command
line's ``--horizon``, ``--column`` and ``--missing``, the fields of ``POST /forecast``'s request
body (which inherits the model), the reference pages and the keyword arguments of
:class:`~seqlab.tasks.forecasting.Forecaster`'s ``predict`` and ``forecast`` all derive from its
fields (:class:`~seqlab.tasks.options.CommandOptions`).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from seqlab.tasks.options import CommandOptions

#: the most values one forecast predicts: each is fed back, so far beyond the series' own length
#: a forecast says little, and the work grows with the square of the steps
MAX_FORECAST_STEPS = 10_000


class ForecastOptions(CommandOptions):
    """How many values ``seqlab forecast``, ``POST /forecast`` and
    :meth:`~seqlab.tasks.forecasting.Forecaster.predict` predict, and how a CSV is read
    (``column`` and ``missing`` describe a CSV input)."""

    #: ``steps`` is ``--horizon`` on the command line (K steps ahead, as ``evaluate --horizon``)
    flags: ClassVar[dict[str, str]] = {"steps": "--horizon"}
    metavars: ClassVar[dict[str, str]] = {"steps": "K"}

    steps: int = Field(
        ge=1,
        le=MAX_FORECAST_STEPS,
        description=f"values to predict (K steps ahead), at most {MAX_FORECAST_STEPS}; a forecast "
        "that diverges (a value beyond ±1e15 or not a number) is an error naming the last good "
        "step",
    )
    column: str | None = Field(
        None, description="the CSV column holding the values (default: the last)"
    )
    missing: Literal["error", "interpolate", "drop"] | None = Field(
        None, description="what to do with empty or NaN values (default: error)"
    )
