"""The options of ``seqlab generate``, declared once (:class:`GenerateOptions`): the command
line's ``--tokens``, ``--temperature``, ``--top-k`` and ``--seed``, the fields of ``POST
/generate``'s request body (which inherits the model), the reference pages and the keyword
arguments of :class:`~seqlab.tasks.language_modeling.LanguageModel`'s ``predict``, ``generate``
and ``stream`` all derive from its fields (:class:`~seqlab.tasks.options.CommandOptions`).

What the options mean together (a temperature of 0 is greedy, so ``top_k`` needs sampling) is
the predictor's rule (:meth:`~seqlab.tasks.language_modeling.LanguageModel.sampling`), since it
depends on the run's ``decode`` section.
"""

from __future__ import annotations

from pydantic import Field, NonNegativeInt

from seqlab.tasks.options import CommandOptions

#: most tokens one generate call writes (a typo like 10**11 would otherwise run for days)
MAX_GENERATE_TOKENS = 100_000
#: the highest sampling temperature accepted (``decode.temperature``'s bound): softmax(z / 100) is
#: already flat
MAX_TEMPERATURE = 100.0
#: the largest sampling seed (``torch.Generator.manual_seed`` takes 64 bits; 32 are plenty)
MAX_SEED = 2**32 - 1


class GenerateOptions(CommandOptions):
    """How ``seqlab generate``, ``POST /generate`` and
    :meth:`~seqlab.tasks.language_modeling.LanguageModel.generate` continue a text: None keeps
    the run's ``decode`` section."""

    tokens: int = Field(
        100,
        ge=0,
        le=MAX_GENERATE_TOKENS,
        title="number of tokens to generate",
        description=f"tokens to generate, at most {MAX_GENERATE_TOKENS:,}",
    )
    temperature: float | None = Field(
        None,
        ge=0.0,
        le=MAX_TEMPERATURE,
        allow_inf_nan=False,
        description=f"0 = greedy; > 0 samples, at most {MAX_TEMPERATURE:g} (default: the run's "
        "decode section)",
    )
    top_k: NonNegativeInt | None = Field(
        None, title="top_k", description="sample from the k most likely tokens (0 = all)"
    )
    seed: int = Field(
        0,
        ge=0,
        le=MAX_SEED,
        description="sampling seed, 0 to 2**32 - 1 (the same seed gives the same text)",
    )
