"""The language-modelling task served: ``POST /generate`` (a continuation of a prefix, all at
once or streamed token by token as server-sent events), declared once as :data:`SERVICE`."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, NonNegativeFloat, NonNegativeInt

from seqlab.data.vocab import unknown_messages
from seqlab.serve.limits import check
from seqlab.serve.service import Cancelled, Handler, Job, Request, Service, warnings_field
from seqlab.storage.text import check_line_breaks

#: tokens detokenised together to find the text a streamed token adds
STREAM_CONTEXT = 8


class GenerateRequest(Request):
    prefix: str = Field("", description="text to continue")
    tokens: NonNegativeInt = Field(100, description="tokens to generate")
    temperature: NonNegativeFloat | None = Field(
        None, description="0 = greedy; > 0 samples (default: the run's decode section)"
    )
    top_k: NonNegativeInt | None = Field(None, description="sample among the k most likely")
    seed: int = Field(0, description="sampling seed (the same seed gives the same text)")
    stream: bool = Field(False, description="send tokens as server-sent events as they come")


class GenerateResponse(BaseModel):
    model: str
    text: str = Field(description="the prefix and its continuation")
    tokens: list[str] = Field(description="the generated tokens")
    warnings: list[str] = warnings_field()


@dataclass
class GenerateWork:
    prefix: str
    tokens: int
    temperature: float | None
    top_k: int | None
    seed: int
    emit: Callable[[dict[str, Any]], None] | None = None  # streaming: called per token


class LanguageModelHandler(Handler):
    """``POST /generate``: continue a prefix, all at once or streamed token by token."""

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

    def prepare(self, request: GenerateRequest) -> tuple[GenerateWork, int]:
        check(
            len(request.prefix), self.limits, "max_chars", "the prefix's length in characters", 413
        )
        check_line_breaks(request.prefix, "prefix")
        check(request.tokens, self.limits, "max_tokens", "tokens")
        self.predictor.check(  # the task's own reading of the options, before queuing
            "generate",
            {"tokens": request.tokens, "temperature": request.temperature, "top_k": request.top_k},
        )
        work = GenerateWork(
            request.prefix, request.tokens, request.temperature, request.top_k, request.seed
        )
        return work, 1

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
        with contextlib.closing(self._tokens(work)) as tokens:  # stopped early: closed now
            for token in tokens:
                if cancelled.is_set():
                    raise Cancelled
                new.append(token)
                if work.emit is not None:
                    delta = self._delta(ids + new)
                    work.emit({"token": p.vocab.to_tokens(token), "text": delta, "index": len(new)})
        return GenerateResponse(
            model=self.name,
            text=p.detokenize(ids + new),
            tokens=[p.vocab.to_tokens(t) for t in new],
            warnings=unknown_messages([("prefix", p.unknown_tokens(work.prefix))]),
        )

    def _tokens(self, work: GenerateWork) -> Iterator[int]:
        """The tokens ``generate`` would append, one at a time
        (:meth:`seqlab.tasks.language_modeling.LanguageModel.stream`)."""
        return self.predictor.stream(
            work.prefix,
            work.tokens,
            temperature=work.temperature,
            top_k=work.top_k,
            seed=work.seed,
        )

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
)
