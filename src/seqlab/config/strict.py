"""What every config section shares: its base, :class:`Strict` (a pydantic model that forbids
unknown keys, coerces nothing and accepts finite numbers only), and the bounded numbers the
sections' fields are declared with (:data:`Positive`, :data:`NonNegative`, :data:`Probability`,
:data:`Decay`).

The sections: :mod:`seqlab.config.data_section` (``data``) and :mod:`seqlab.config.sections`
(``model``, ``train``, ``decode``).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

Positive = Annotated[int, Field(gt=0)]
NonNegative = Annotated[int, Field(ge=0)]
Probability = Annotated[float, Field(ge=0.0, lt=1.0)]
#: an exponential-moving-average coefficient (Adam's β₁, β₂)
Decay = Annotated[float, Field(ge=0.0, lt=1.0)]


class Strict(BaseModel):
    """Base for every config section: unknown keys are errors, values are never coerced
    (``true`` is not the number 1, ``"3"`` is not 3), assignments are validated, and every
    number is finite (``.inf``, ``.nan`` and ``1e309``, which YAML reads as infinity, are
    refused); each float field also states the range that makes sense for it."""

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, frozen=False, strict=True, allow_inf_nan=False
    )
