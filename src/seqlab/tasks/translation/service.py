"""The translation task served: ``POST /translate`` (n-best translations, and on request each
best output's token log-probabilities and attention), declared once as :data:`SERVICE`.

The engine is chosen once per model from the server's ``engine`` setting, in the task's own
vocabulary (:data:`~seqlab.tasks.translation.engines.SERVER_ENGINES`,
:func:`~seqlab.tasks.translation.engines.check_engine`); a request asking for attention runs
seqlab's own model (CTranslate2 returns none).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, PositiveInt

from seqlab.errors import SeqlabError
from seqlab.serve.limits import Limits, check
from seqlab.serve.service import (
    Handler,
    InputError,
    Job,
    LayerHeads,
    Matrix,
    Request,
    Service,
    read_texts,
    unknown_warnings,
    warnings_field,
    weights,
)
from seqlab.tasks.translation.engines import SERVER_ENGINES, check_engine


class TranslateRequest(Request):
    text: str | list[str] = Field(description="one text or a list")
    beam: PositiveInt | None = Field(
        None, description="beam size; 1 = greedy (default: the run's decode section)"
    )
    nbest: PositiveInt | None = Field(None, description="hypotheses per text (needs beam >= nbest)")
    length_penalty: float | None = Field(
        None,
        ge=0.0,
        le=10.0,
        description="beam search ranks by log_prob / length^length_penalty (needs beam > 1; "
        "default: the run's decode section)",
    )
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


@dataclass
class TranslateWork:
    texts: list[str]
    beam: int | None
    nbest: int | None
    length_penalty: float | None
    attention: bool


#: the server's engine settings (``seqlab serve --engine``): the translation task's names
#: (:mod:`seqlab.tasks.translation.engines`)
ENGINES = SERVER_ENGINES


class TranslationHandler(Handler):
    """``POST /translate``: n-best translations, and on request the attention of the best.

    Settings (``seqlab serve --engine --quantize``):
        engine: ``auto`` (CTranslate2 for the models it decodes, when it is installed),
            ``seqlab`` or ``ctranslate2`` (required for the models it decodes: an error when it
            is not installed). Models CTranslate2 does not decode
            (:meth:`~seqlab.tasks.translation.Translator.decodes_with`) always run on seqlab,
            and so does every request that asks for attention (CTranslate2 returns none).
        quantize: with CTranslate2, a compute type such as ``int8``.
    """

    def __init__(
        self, name: str, predictor: Any, limits: Limits, settings: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(name, predictor, limits, settings)
        engine, quantize = self.settings.get("engine", "auto"), self.settings.get("quantize")
        self.backend = self._backend(engine, quantize)
        self.quantize = quantize if self.backend == "ctranslate2" else None

    def _backend(self, engine: str, quantize: str | None) -> str:
        """The predictor's engine (``pytorch``, seqlab's own search, or ``ctranslate2``) for
        ``--engine``, checked by the task's rules
        (:func:`~seqlab.tasks.translation.check_engine`)."""
        if engine not in ENGINES:
            raise SeqlabError(f"--engine must be {', '.join(ENGINES)}, not {engine!r}")
        arch = self.cfg.model.arch
        if engine == "seqlab" or not self.predictor.decodes_with("ctranslate2"):
            return "pytorch"
        if engine == "auto":
            try:
                check_engine("ctranslate2", None, arch)
            except SeqlabError:  # not installed: seqlab's own search
                return "pytorch"
        check_engine("ctranslate2", quantize, arch)
        return "ctranslate2"

    @property
    def engine(self) -> str:
        if self.backend == "ctranslate2":
            return f"ctranslate2 {self.quantize}" if self.quantize else "ctranslate2"
        return "seqlab"

    @property
    def workers(self) -> int:
        """CTranslate2 decodes as many batches at once as its engine has workers
        (:func:`~seqlab.export.ctranslate2.give_cores_to_ctranslate2`); seqlab's engine one."""
        if self.backend == "ctranslate2":
            return int(self.predictor.ctranslate2_engine(self.quantize).workers)
        return 1

    def warm_up(self) -> None:
        if self.backend == "ctranslate2":  # export into RUN/exports once, and load it
            self.predictor.ctranslate2_engine(self.quantize)

    def details(self) -> dict[str, Any]:
        languages, decode = self.predictor.languages, self.cfg.decode
        return {
            "languages": None
            if languages is None
            else {"source": languages[0], "target": languages[1]},
            "attention": self.predictor.attention_kinds,
            "decoding": {
                "strategy": decode.strategy,
                "beam_size": decode.beam_size if decode.strategy == "beam" else 1,
                "nbest": decode.nbest,
                "length_penalty": decode.length_penalty,
            },
        }

    def prepare(self, request: TranslateRequest) -> tuple[TranslateWork, int]:
        texts = read_texts(request.text, self.limits)
        if request.beam is not None:
            check(request.beam, self.limits, "max_beam", "beam")
        if request.nbest is not None:
            check(request.nbest, self.limits, "max_nbest", "nbest")
        # the task's own reading of the options (nbest > beam: 422)
        options = {"beam": request.beam, "nbest": request.nbest}
        self.predictor.check("translate", {**options, "length_penalty": request.length_penalty})
        if request.attention and not self.predictor.attention_kinds:
            raise InputError(
                f"model {self.name!r} (model.arch={self.cfg.model.arch}) has no attention over "
                "the source: it encodes the source into one vector"
            )
        work = TranslateWork(
            texts, request.beam, request.nbest, request.length_penalty, request.attention
        )
        return work, len(texts)

    def run(self, jobs: Sequence[Job]) -> list[Any]:
        groups: dict[tuple[Any, ...], list[int]] = {}
        for i, job in enumerate(jobs):
            w: TranslateWork = job.payload
            groups.setdefault((w.beam, w.nbest, w.length_penalty, w.attention), []).append(i)
        results: list[Any] = [None] * len(jobs)
        for (beam, nbest, length_penalty, attention), members in groups.items():
            try:
                answers = self._translate(
                    [jobs[i].payload for i in members], beam, nbest, length_penalty, attention
                )
            except Exception as exc:  # noqa: BLE001 - these jobs fail, the others go on
                answers = [exc] * len(members)
            for i, answer in zip(members, answers, strict=True):
                results[i] = answer
        return results

    def _translate(
        self,
        works: list[TranslateWork],
        beam: int | None,
        nbest: int | None,
        length_penalty: float | None,
        attention: bool,
    ) -> list[TranslateResponse]:
        p = self.predictor
        texts = [t for w in works for t in w.texts]
        backend = "pytorch" if attention else self.backend
        found = p.hypotheses(
            texts,
            beam=beam,
            nbest=nbest,
            length_penalty=length_penalty,
            batch_size=self.limits.max_batch,
            engine=backend,
            quantize=self.quantize if backend == "ctranslate2" else None,
        )
        out, start = [], 0
        for w in works:
            translations, notes = [], []
            for i, text in enumerate(w.texts):
                hyps = found[start + i]
                detail = self._detail(text, hyps[0].tokens) if attention else None
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
                if p.is_cut(text):
                    notes.append(
                        f"text {i + 1}: only its first {p.max_source_tokens} tokens were read "
                        f"(the model's data.max_len={self.cfg.data.max_len})"
                    )
            start += len(w.texts)
            out.append(
                TranslateResponse(
                    model=self.name,
                    engine="seqlab" if backend == "pytorch" else self.engine,
                    translations=translations,
                    notes=notes,
                    warnings=unknown_warnings(p, w.texts),
                )
            )
        return out

    def _detail(self, text: str, tokens: list[int]) -> AttentionDetail:
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
)
