"""The translation task served: ``POST /translate`` (n-best translations, and on request each
best output's token log-probabilities and attention), declared once as :data:`SERVICE`.

The request body is the decoding options model
(:class:`~seqlab.tasks.translation.options.TranslateOptions`) and the request's own fields: it is
validated once, when parsed; the options travel to the predictor as that model, and requests with
equal options are decoded together. The engine is chosen once per model from the server's
``engine`` setting (:data:`~seqlab.tasks.translation.engines.SERVER_ENGINES`): with ``auto``, a
model whose scheme CTranslate2 cannot hold runs on seqlab's engine, which ``/models`` and the log
say, with why (:func:`~seqlab.tasks.translation.engines.ctranslate2_refusal`); a request asking
for attention runs seqlab's own model (CTranslate2 returns none).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from seqlab.config import DecodeConfig
from seqlab.data.tokenizers import normalisation_messages
from seqlab.errors import SeqlabError
from seqlab.serving.limits import Limits
from seqlab.serving.service import (
    Handler,
    InputError,
    Job,
    LayerHeads,
    Matrix,
    Request,
    Service,
    read_texts,
    run_grouped,
    unknown_warnings,
    warnings_field,
    weights,
)
from seqlab.tasks.translation.decoding import normalised_inputs
from seqlab.tasks.translation.engines import (
    AUTO,
    CTRANSLATE2,
    SEQLAB,
    SERVER_ENGINES,
    check_engine,
    ctranslate2_refusal,
)
from seqlab.tasks.translation.options import EngineOptions, TranslateOptions
from seqlab.tasks.translation.translator import Translator

log = logging.getLogger("seqlab.serve")


def options_model() -> type[TranslateOptions]:
    """The options ``POST /translate`` takes: those of ``seqlab translate``
    (:attr:`seqlab.tasks.base.Predictor.command_options`)."""
    return Translator.command_options["translate"]  # type: ignore[return-value]


class TranslateRequest(Request, TranslateOptions):
    """The texts to translate, and how (the fields of
    :class:`~seqlab.tasks.translation.options.TranslateOptions`)."""

    text: str | list[str] = Field(description="one text or a list")
    attention: bool = Field(
        False,
        description="also return, for the best output, its tokens with their log-probabilities "
        "and the attention weights (runs seqlab's own model)",
    )


class Hypothesis(BaseModel):
    text: str
    score: float = Field(description="what the search ranked by (length-normalised for beams)")
    log_prob: float | None = Field(None, description="log p(output, <eos> | source)")


class AttentionDetail(BaseModel):
    """The best output of one text, token by token, and where the model attended."""

    source_tokens: list[str] = Field(description="what the encoder read, <eos> included")
    target_tokens: list[str] = Field(description="the output tokens and the final <eos>")
    target_inputs: list[str] = Field(description="what the decoder read: <bos> and the outputs")
    log_probs: list[float] = Field(description="log-probability of each target token")
    alignment: Matrix | None = Field(
        None,
        description="targets × sources: an RNN's attention, or the Transformer's last-layer "
        "cross-attention averaged over heads",
    )
    cross: LayerHeads | None = Field(None, description="decoder layers × heads × targets × sources")
    encoder: LayerHeads | None = Field(
        None, description="encoder layers × heads × sources × sources"
    )
    decoder: LayerHeads | None = Field(
        None, description="decoder layers × heads × targets × decoder inputs (causal)"
    )


class Translation(BaseModel):
    text: str = Field(description="the best translation")
    hypotheses: list[Hypothesis]
    detail: AttentionDetail | None = None


class TranslateResponse(BaseModel):
    model: str
    engine: str
    translations: list[Translation]
    notes: list[str] = Field(default_factory=list)
    warnings: list[str] = warnings_field()


@dataclass(frozen=True)
class TranslateJob:
    """One request, checked: its texts, its options (validated when the body was parsed), the
    run's decoding they give, and whether it asks for attention. Jobs with equal ``options`` and
    ``attention`` are decoded together (:meth:`TranslationHandler.run`)."""

    texts: list[str]
    options: TranslateOptions
    decode: DecodeConfig
    attention: bool


#: the server's engine settings (``seqlab serve --engine``): the translation task's names
#: (:mod:`seqlab.tasks.translation.engines`)
ENGINES = SERVER_ENGINES


class TranslationHandler(Handler):
    """``POST /translate``: n-best translations, and on request the attention of the best.

    Settings (``seqlab serve --engine --quantize``):
        engine: ``auto`` (CTranslate2 for the models it decodes, when it is installed; seqlab's
            engine for the others, which ``/models``' ``engine_reason`` and the log say),
            ``seqlab`` or ``ctranslate2`` (required for the Transformers: an error when it is not
            installed or cannot hold the model's scheme). Models other than Transformers always
            run on seqlab, and so does every request that asks for attention (CTranslate2
            returns none).
        quantize: with CTranslate2, a compute type such as ``int8``.
    """

    limited: ClassVar[Mapping[str, str]] = {"beam": "max_beam", "nbest": "max_nbest"}

    def __init__(
        self, name: str, predictor: Any, limits: Limits, settings: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(name, predictor, limits, settings)
        engine, quantize = self.settings.get("engine", AUTO), self.settings.get("quantize")
        self.backend, self.why = self._backend(engine, quantize)
        self.quantize = quantize if self.backend == CTRANSLATE2 else None
        #: what decodes this model's requests, checked once here (attention: seqlab's own)
        self.decodes = EngineOptions.model_construct(engine=self.backend, quantize=self.quantize)
        if self.why:
            log.info("model %s runs on seqlab's engine: %s", name, self.why)

    def _backend(self, engine: str, quantize: str | None) -> tuple[str, str | None]:
        """The engine for ``--engine`` (``seqlab`` or ``ctranslate2``), checked by the task's
        rules (:func:`~seqlab.tasks.translation.check_engine`), and why seqlab's was chosen
        where ``auto`` or ``ctranslate2`` was asked for (None otherwise): models other than
        Transformers always run on seqlab; a Transformer whose scheme CTranslate2 cannot hold
        does with ``auto``, and is an error naming ``--engine seqlab`` with ``ctranslate2``."""
        if engine not in ENGINES:
            raise SeqlabError(f"--engine must be {', '.join(ENGINES)}, not {engine!r}")
        if engine == SEQLAB:
            return SEQLAB, None
        refusal = ctranslate2_refusal(self.cfg.model)
        if refusal is not None and (engine == AUTO or self.cfg.model.arch != "transformer"):
            return SEQLAB, refusal  # a Transformer asked for by name is refused below
        if engine == AUTO:
            try:
                check_engine(CTRANSLATE2, None, self.cfg.model, device=self.device)
            except SeqlabError as exc:  # not installed: seqlab's own search
                return SEQLAB, str(exc)
        check_engine(CTRANSLATE2, quantize, self.cfg.model, device=self.device)
        return CTRANSLATE2, None

    @property
    def device(self) -> str:
        """Where the model computes (``cpu``, ``cuda``): CTranslate2 decodes there too."""
        return self.predictor.device.type

    @property
    def engine(self) -> str:
        if self.backend == CTRANSLATE2:
            return f"ctranslate2 {self.quantize}" if self.quantize else CTRANSLATE2
        return SEQLAB

    @property
    def workers(self) -> int:
        """CTranslate2 decodes as many batches at once as its engine has workers
        (:func:`~seqlab.export.ctranslate2.give_cores_to_ctranslate2`); seqlab's engine one."""
        if self.backend == CTRANSLATE2:
            return int(self.predictor.ctranslate2_engine(self.quantize).workers)
        return 1

    def warm_up(self) -> None:
        if self.backend == CTRANSLATE2:  # export into RUN/exports once, and load it
            self.predictor.ctranslate2_engine(self.quantize)

    def details(self) -> dict[str, Any]:
        languages, decode = self.predictor.languages, self.cfg.decode
        return {
            "languages": None
            if languages is None
            else {"source": languages[0], "target": languages[1]},
            "attention": self.predictor.attention_kinds,
            "engine_reason": self.why,
            "decoding": {
                "strategy": decode.strategy,
                "beam_size": decode.beam_size if decode.strategy == "beam" else 1,
                "nbest": decode.nbest,
                "length_penalty": decode.length_penalty,
            },
        }

    def prepare(self, request: TranslateRequest) -> tuple[TranslateJob, int]:
        texts = read_texts(request.text, self.limits)
        options = options_model().taken_from(request)  # validated when the body was parsed
        self.check_limited(options)
        decode = self.predictor.decoding(options)  # nbest > beam: 422
        if request.attention and not self.predictor.attention_kinds:
            raise InputError(
                f"model {self.name!r} (model.arch={self.cfg.model.arch}) has no attention over "
                "the source: it encodes the source into one vector"
            )
        return TranslateJob(texts, options, decode, request.attention), len(texts)

    def run(self, jobs: Sequence[Job]) -> list[Any]:
        """Jobs with equal options (and attention) decoded together (a frozen options model is
        hashable; :func:`~seqlab.serving.service.run_grouped`)."""
        return run_grouped(jobs, self._translate, key=lambda w: (w.options, w.attention))

    def _translate(self, works: list[TranslateJob]) -> list[TranslateResponse]:
        p, attention = self.predictor, works[0].attention
        how = self.cfg.data.normalize
        sentences = [[p.sentence(t) for t in w.texts] for w in works]  # tokenised once
        backend = SEQLAB if attention else self.backend
        found = p.decode(
            [s for group in sentences for s in group],
            works[0].decode,
            batch_size=self.limits.max_batch,
            how=EngineOptions() if attention else self.decodes,
        )
        out, start = [], 0
        for group in sentences:
            translations, notes = [], []
            for i, sentence in enumerate(group):
                hyps = found[start + i]
                detail = self._detail(sentence, hyps[0].tokens) if attention else None
                translations.append(
                    Translation(
                        text=p.detokenize(hyps[0].tokens),
                        hypotheses=[
                            Hypothesis(
                                text=p.detokenize(h.tokens), score=h.score, log_prob=h.log_prob
                            )
                            for h in hyps
                        ],
                        detail=detail,
                    )
                )
                if sentence.cut:
                    notes.append(
                        f"text {i + 1}: only its first {p.max_source_tokens} tokens were read "
                        f"(the model's data.max_len={self.cfg.data.max_len})"
                    )
            start += len(group)
            out.append(
                TranslateResponse(
                    model=self.name,
                    engine=SEQLAB if backend == SEQLAB else self.engine,
                    translations=translations,
                    notes=notes,
                    warnings=normalisation_messages(
                        normalised_inputs(
                            ((f"text {i}", s.text) for i, s in enumerate(group, 1)), how
                        ),
                        how,
                    )
                    + unknown_warnings(p, group),
                )
            )
        return out

    def _detail(self, text: Any, tokens: list[int]) -> AttentionDetail:
        """The predictor's teacher-forced reading of the output: each token's log-probability
        and every attention weight
        (:meth:`seqlab.tasks.translation.Translator.attention`), for the wire."""
        a = self.predictor.attention(text, tokens)
        return AttentionDetail(
            source_tokens=a.source_tokens,
            target_tokens=a.target_tokens,
            target_inputs=a.target_inputs,
            log_probs=a.log_probs.tolist(),
            alignment=None if a.alignment is None else weights(a.alignment),
            **{kind: [weights(w) for w in layers] for kind, layers in a.layers.items()},
        )


SERVICE = Service(
    route="/translate",
    request=TranslateRequest,
    response=TranslateResponse,
    handler=TranslationHandler,
    summary="Translate texts",
    panel=Path(__file__).with_name("panel.js"),
    options=options_model,
)
