"""The language-modelling task served: ``POST /generate`` (a continuation of a prefix, all at
once or streamed token by token as server-sent events), declared once as :data:`SERVICE`.

The request body is ``seqlab generate``'s options model
(:class:`~seqlab.tasks.language_modeling.options.GenerateOptions`) and the request's own fields
(the prefix, ``stream``): validated once, when parsed, and handed to the predictor as that model.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from seqlab.serving.limits import check
from seqlab.serving.service import (
    Cancelled,
    Job,
    OptionsHandler,
    Request,
    Service,
    warnings_field,
)
from seqlab.storage.text import check_line_breaks
from seqlab.tasks.language_modeling.options import GenerateOptions
from seqlab.tasks.language_modeling.task import LanguageModel

#: tokens detokenised together to find the text a streamed token adds
STREAM_CONTEXT = 8


def options_model() -> type[GenerateOptions]:
    """The options ``POST /generate`` takes: those of ``seqlab generate``
    (:attr:`seqlab.tasks.base.Predictor.command_options`)."""
    return LanguageModel.command_options["generate"]  # type: ignore[return-value]


class GenerateRequest(Request, GenerateOptions):
    """The prefix to continue, and how (the fields of
    :class:`~seqlab.tasks.language_modeling.options.GenerateOptions`)."""

    prefix: str = Field("", description="text to continue")
    stream: bool = Field(False, description="send tokens as server-sent events as they come")


class GenerateResponse(BaseModel):
    model: str
    text: str = Field(description="the prefix and its continuation")
    tokens: list[str] = Field(description="the generated tokens")
    warnings: list[str] = warnings_field()


@dataclass
class GenerateWork:
    """One request, checked: its prefix and its options (validated when the body was parsed)."""

    prefix: str
    options: GenerateOptions
    emit: Callable[[dict[str, Any]], None] | None = None  # streaming: called per token


class LanguageModelHandler(OptionsHandler):
    """``POST /generate``: continue a prefix, all at once or streamed token by token. The
    generic handler's reading of a request (the prefix, the options model as parsed); each job
    is then its own loop over tokens, which a streaming client may stop."""

    command = "generate"
    limited: ClassVar[Mapping[str, str]] = {"tokens": "max_tokens"}

    def details(self) -> dict[str, Any]:
        p = self.predictor
        return {
            "decoding": {
                "strategy": self.cfg.decode.strategy,
                "temperature": self.cfg.decode.temperature,
                "top_k": self.cfg.decode.top_k,
                "vocabulary": len(p.vocab),
                "tokenizer": str(self.cfg.data.tokenizer),
            }
        }

    def inputs(self, request: GenerateRequest) -> tuple[str, int]:
        prefix = request.prefix
        check(len(prefix), self.limits, "max_chars", "the prefix's length in characters", 413)
        check_line_breaks(prefix, "prefix")
        return prefix, 1

    def check(self, inputs: str, options: GenerateOptions) -> None:
        self.check_limited(options)
        self.predictor.ready(options)  # what they mean for this run, before queuing

    def prepare(self, request: GenerateRequest) -> tuple[GenerateWork, int]:
        work, size = super().prepare(request)
        return GenerateWork(work.inputs, work.options), size  # a stream sets its emit

    def run(self, jobs: Sequence[Job]) -> list[Any]:
        results: list[Any] = []
        for job in jobs:  # one after another: each is its own loop over tokens
            try:
                results.append(self._generate(job.payload, job.cancelled))
            except Exception as exc:  # noqa: BLE001
                results.append(exc)
        return results

    def _generate(self, work: GenerateWork, cancelled: Any) -> GenerateResponse:
        p = self.predictor
        ids, new = p.prefix_ids(work.prefix), []
        # an empty prefix: no text before the first token, whose leading space is left out, as
        # in the response's text (text_of)
        started = bool(p.tokenizer.tokenize(work.prefix))
        with contextlib.closing(self._tokens(work)) as tokens:  # stopped early: closed now
            for token in tokens:
                if cancelled.is_set():
                    raise Cancelled
                new.append(token)
                if work.emit is not None:
                    delta = self._delta(ids + new)
                    if not started:
                        delta = delta.lstrip()
                        started = bool(delta)
                    work.emit({"token": p.vocab.to_tokens(token), "text": delta, "index": len(new)})
        return GenerateResponse(
            model=self.name,
            text=p.text_of(work.prefix, new),
            tokens=[p.vocab.to_tokens(t) for t in new],
            warnings=p.input_warnings(work.prefix, "prefix"),
        )

    def _tokens(self, work: GenerateWork) -> Iterator[int]:
        """The tokens ``generate`` would append, one at a time
        (:meth:`seqlab.tasks.language_modeling.LanguageModel.stream`)."""
        return self.predictor.stream(work.prefix, options=work.options)

    def _delta(self, ids: list[int]) -> str:
        """The text the last of ``ids`` adds, from the last few tokens only (detokenising is
        local: spaces and attached punctuation), so streaming n tokens costs O(n)."""
        detokenize = self.predictor.detokenize
        for tail in (ids[-STREAM_CONTEXT:], ids):
            before, after = detokenize(tail[:-1]), detokenize(tail)
            if after.startswith(before):
                return after[len(before) :]
        return after


SERVICE = Service(
    route="/generate",
    request=GenerateRequest,
    response=GenerateResponse,
    handler=LanguageModelHandler,
    summary="Continue a text",
    stream=True,
    panel=Path(__file__).with_name("panel.js"),
    options=options_model,
)
