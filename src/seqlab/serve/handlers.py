"""Between the HTTP API and the predictors: one small handler per task, which shapes requests
into calls of the predictor that :func:`seqlab.load` returns for a run directory, and its
answers into responses.

The rest of :mod:`seqlab.serve` (routes, limits, batching) knows no task, and the handlers know
no more of one than its predictor declares (:mod:`seqlab.tasks`): what a model can do — its
engines, its attention, its labels or languages, how it samples — is read from the predictor,
and the work is done by its public methods: a translator's ``hypotheses`` and ``attention``, a
classifier's ``probabilities``, ``read_image`` and ``attention``, a language model's ``stream``
(the tokens ``generate`` chooses, one at a time, for server-sent events), a forecaster's
``forecast``. A handler checks a request against the server's limits and the predictor's
``check`` (:meth:`~Handler.prepare`, on the event loop, cheap), runs a batch of prepared
requests on the batcher's worker thread (:meth:`~Handler.run_batch`) and describes its model for
``/models`` (:meth:`~Handler.info`).

Predictors show no progress bars here (:func:`seqlab.runtime.progress.no_progress`): the server's
standard error is its log. Nor do they warn of tokens outside the vocabulary
(:func:`seqlab.data.vocab.quiet_unknown`): each response lists them in its ``warnings``, by text
(:func:`seqlab.data.vocab.unknown_messages`). A text holding a line break other than ``\\n``
is refused (422, :func:`seqlab.storage.text.check_line_breaks`). Attention weights are rounded to 4
decimals for the wire.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import io
import math
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor

from seqlab.data.vocab import quiet_unknown, unknown_messages
from seqlab.errors import SeqlabError
from seqlab.runtime.progress import no_progress
from seqlab.serve import schemas
from seqlab.serve.batching import Job
from seqlab.serve.limits import LimitExceeded, Limits, check
from seqlab.storage.text import check_line_breaks
from seqlab.tasks.translation.engines import SERVER_ENGINES

#: decimals kept of attention weights in responses
WEIGHT_DECIMALS = 4
#: tokens detokenised together to find the text a streamed token adds
STREAM_CONTEXT = 8


class InputError(SeqlabError):
    """A request this model cannot take (answered 422 with the message)."""


class Cancelled(Exception):
    """The client stopped waiting for a streaming job."""


def _weights(x: Tensor) -> list[Any]:
    return torch.round(x.detach().float().cpu(), decimals=WEIGHT_DECIMALS).tolist()


def _texts(value: str | list[str] | None, limits: Limits, what: str = "text") -> list[str]:
    """One text or a list, checked: not empty, within ``max_texts`` and ``max_chars``, holding no
    line break other than ``\\n``."""
    if value is None:
        raise InputError(f"give {what}: one text or a list of texts")
    texts = [value] if isinstance(value, str) else list(value)
    if not texts:
        raise InputError(f"{what} is an empty list; give at least one text")
    check(len(texts), limits, "max_texts", f"the number of texts ({what})", 413)
    for i, text in enumerate(texts, start=1):
        where = what if isinstance(value, str) else f"{what} {i}"
        check(len(text), limits, "max_chars", f"the length of {where} in characters", 413)
        if not text.strip():
            raise InputError(f"{where} is empty; give something to read")
        check_line_breaks(text, where)
    return texts


def _unknown(predictor: Any, texts: Sequence[str]) -> list[str]:
    """The ``warnings`` of a response: the tokens of each text (``text 1``, ``text 2``, …) that
    the model's vocabulary lacks, read as ``<unk>``."""
    return unknown_messages(
        (f"text {i}", predictor.unknown_tokens(t)) for i, t in enumerate(texts, start=1)
    )


class Handler:
    """The glue for one task (subclasses) around one loaded model.

    Args:
        name: the model's name in requests.
        predictor: what :func:`seqlab.load` returned for its run directory.
        limits: the server's per-request limits.
    """

    task: ClassVar[str] = ""

    def __init__(self, name: str, predictor: Any, limits: Limits) -> None:
        self.name, self.predictor, self.limits = name, predictor, limits
        self.cfg = predictor.cfg

    @property
    def engine(self) -> str:
        return "seqlab"

    @property
    def workers(self) -> int:
        """Batches of this model that run at once (the batcher's worker threads)."""
        return 1

    def warm_up(self) -> None:
        """Work done once before serving (e.g. an export); errors surface at startup."""

    def info(self) -> schemas.ModelInfo:
        run = self.predictor.run
        return schemas.ModelInfo(
            name=self.name,
            task=self.task,  # type: ignore[arg-type]
            arch=self.cfg.model.arch,
            dataset=str(self.cfg.data.dataset),
            engine=self.engine,
            workers=self.workers,
            parameters=sum(p.numel() for p in self.predictor.model.parameters()),  # shared once
            checkpoint_step=run.meta.get("step") if run is not None else None,
            metrics=run.metrics if run is not None else {},
            **self._task_info(),
        )

    def _task_info(self) -> dict[str, Any]:
        return {}

    def prepare(self, request: Any) -> tuple[Any, int]:
        """Check ``request`` (limits, inputs) and return the work and its size in texts."""
        raise NotImplementedError

    def run(self, jobs: Sequence[Job]) -> list[Any]:
        """Run prepared jobs together (worker thread): one response or exception per job."""
        raise NotImplementedError

    def run_batch(self, jobs: Sequence[Job]) -> list[Any]:
        """What the batcher calls: :meth:`run` without progress bars (stderr is the log) or
        warnings of unknown tokens (each response carries its own)."""
        with no_progress(), quiet_unknown():
            return self.run(jobs)


# ------------------------------------------------------------------------------ translation
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

    Args:
        engine: ``auto`` (CTranslate2 for the models it decodes, when it is installed),
            ``seqlab`` or ``ctranslate2`` (required for the models it decodes: an error when it
            is not installed). Models CTranslate2 does not decode
            (:meth:`~seqlab.tasks.translation.Translator.decodes_with`) always run on seqlab,
            and so does every request that asks for attention (CTranslate2 returns none).
        quantize: with CTranslate2, a compute type such as ``int8``.
    """

    task = "translation"

    def __init__(
        self,
        name: str,
        predictor: Any,
        limits: Limits,
        engine: str = "auto",
        quantize: str | None = None,
    ) -> None:
        super().__init__(name, predictor, limits)
        self.backend = self._backend(engine, quantize)
        self.quantize = quantize if self.backend == "ctranslate2" else None

    def _backend(self, engine: str, quantize: str | None) -> str:
        """The predictor's engine (``pytorch``, seqlab's own search, or ``ctranslate2``) for
        ``--engine``, checked by the task's rules
        (:func:`~seqlab.tasks.translation.check_engine`)."""
        from seqlab.tasks.translation import check_engine

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

    def _task_info(self) -> dict[str, Any]:
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

    def prepare(self, request: schemas.TranslateRequest) -> tuple[TranslateWork, int]:
        texts = _texts(request.text, self.limits)
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
    ) -> list[schemas.TranslateResponse]:
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
                    schemas.Translation(
                        text=p.detokenize(hyps[0].tokens),
                        hypotheses=[
                            schemas.Hypothesis(
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
                schemas.TranslateResponse(
                    model=self.name,
                    engine="seqlab" if backend == "pytorch" else self.engine,
                    translations=translations,
                    notes=notes,
                    warnings=_unknown(p, w.texts),
                )
            )
        return out

    def _detail(self, text: str, tokens: list[int]) -> schemas.AttentionDetail:
        """The predictor's teacher-forced reading of the output: each token's log-probability
        and every attention weight
        (:meth:`seqlab.tasks.translation.Translator.attention`), for the wire."""
        a = self.predictor.attention(text, tokens)
        return schemas.AttentionDetail(
            source_tokens=a.source_tokens,
            target_tokens=a.target_tokens,
            target_inputs=a.target_inputs,
            log_probs=a.log_probs.tolist(),
            alignment=None if a.alignment is None else _weights(a.alignment),
            **{kind: [_weights(w) for w in layers] for kind, layers in a.layers.items()},
        )


# ---------------------------------------------------------------------------- classification
@dataclass
class ClassifyWork:
    items: list[str] | list[bytes]
    attention: bool


def _image_bytes(value: str, where: str, limits: Limits) -> bytes:
    """Base64 (or a ``data:`` URL) to bytes, within ``max_upload_bytes``."""
    if value.startswith("data:"):
        head, _, value = value.partition(",")
        if ";base64" not in head:
            raise InputError(f"{where}: a data: URL must be base64 (data:image/png;base64,...)")
    check(len(value) * 3 // 4, limits, "max_upload_bytes", f"the size of {where} in bytes", 413)
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InputError(f"{where} is not valid base64") from None


class ClassificationHandler(Handler):
    """``POST /classify``: labels and probabilities of texts or images, and self-attention
    (and, for a ViT, attention rollout over the image; Abnar & Zuidema 2020)."""

    task = "classification"

    def _task_info(self) -> dict[str, Any]:
        p = self.predictor
        return {
            "labels": list(p.labels),
            "input": "image" if p.images else "text",
            "image_size": p.image_size if p.images else None,
            "attention": p.attention_kinds,
        }

    def prepare(self, request: schemas.ClassifyRequest) -> tuple[ClassifyWork, int]:
        p = self.predictor
        if request.attention and not p.attention_kinds:
            raise InputError(
                f"model {self.name!r} (model.arch={self.cfg.model.arch}) has no self-attention; "
                "the transformer_classifier and vit models have"
            )
        if p.images:
            if request.text is not None:
                raise InputError(f"model {self.name!r} classifies images: send image, not text")
            if request.image is None:
                raise InputError("give image: one base64 image file or a list")
            single = isinstance(request.image, str)
            images = [request.image] if single else list(request.image)
            if not images:
                raise InputError("image is an empty list; give at least one image")
            check(len(images), self.limits, "max_texts", "the number of images", 413)
            items: Any = [
                _image_bytes(x, "image" if single else f"image {i}", self.limits)
                for i, x in enumerate(images, start=1)
            ]
        else:
            if request.image is not None:
                raise InputError(f"model {self.name!r} classifies text: send text, not image")
            items = _texts(request.text, self.limits)
        return ClassifyWork(items, request.attention), len(items)

    def _image(self, data: bytes, where: str) -> tuple[Tensor, str | None]:
        """An uploaded image as the predictor reads it: its pixel count, from the header, within
        ``max_image_pixels`` before anything is decoded (a decompression bomb is a 413)."""
        from seqlab.data.images import ImageTooLarge

        limit = self.limits.max_image_pixels
        try:
            return self.predictor.read_image(io.BytesIO(data), max_pixels=limit)
        except ImageTooLarge as exc:
            count = f"is {exc.pixels:,}" if exc.pixels is not None else "is more than PIL opens"
            raise LimitExceeded(
                f"{where}'s pixel count {count}, over the server's limit max_image_pixels={limit}"
                + ("" if exc.limit == limit else f" (PIL opens at most {exc.limit:,})"),
                "max_image_pixels",
                413,
            ) from None
        except SeqlabError:
            raise InputError(f"{where} is not an image file PIL can read") from None

    def run(self, jobs: Sequence[Job]) -> list[Any]:
        p = self.predictor
        results: list[Any] = [None] * len(jobs)
        inputs: list[Any] = []  # per job that can run: its texts or its images (N, C, H, W)
        notes: list[list[str]] = []
        live = []
        for j, job in enumerate(jobs):
            w: ClassifyWork = job.payload
            try:
                if p.images:
                    decoded = [
                        self._image(x, f"image {i}")  # type: ignore[arg-type]
                        for i, x in enumerate(w.items, start=1)
                    ]
                    inputs.append(torch.stack([x for x, _ in decoded]))
                    notes.append([f"image {i}: {n}" for i, (_, n) in enumerate(decoded, 1) if n])
                else:
                    inputs.append(list(w.items))
                    notes.append([])
                live.append(j)
            except Exception as exc:  # noqa: BLE001 - this job fails alone
                results[j] = exc
        if not live:
            return results
        if p.images:
            probs = p.probabilities(torch.cat(inputs), batch_size=self.limits.max_batch)
        else:
            probs = p.probabilities([t for x in inputs for t in x], self.limits.max_batch)
        start = 0
        for j, x, job_notes in zip(live, inputs, notes, strict=True):
            n = len(x)
            try:
                results[j] = self._response(jobs[j].payload, x, probs[start : start + n], job_notes)
            except Exception as exc:  # noqa: BLE001
                results[j] = exc
            start += n
        return results

    def _response(
        self, work: ClassifyWork, inputs: Any, probs: Tensor, notes: list[str]
    ) -> schemas.ClassifyResponse:
        labels = self.predictor.labels
        out = []
        for i, row in enumerate(probs):
            best = int(row.argmax())
            out.append(
                schemas.Classification(
                    label=labels[best],
                    probability=float(row[best]),
                    probabilities={lab: float(q) for lab, q in zip(labels, row, strict=True)},
                    notes=[n for n in notes if n.startswith(f"image {i + 1}:")],
                    attention=self._attention(inputs[i]) if work.attention else None,
                )
            )
        unknown = [] if self.predictor.images else _unknown(self.predictor, inputs)
        return schemas.ClassifyResponse(model=self.name, results=out, warnings=unknown)

    def _attention(self, item: str | Tensor) -> schemas.ClassAttention:
        p = self.predictor
        names, weights = p.attention(item)  # L × (h, T, T)
        rollout = None
        if "rollout" in p.attention_kinds:
            share = p.rollout(weights)  # (N,): a square grid of patches, row by row
            side = math.isqrt(len(share))
            if side * side == len(share):
                rollout = _weights(share.reshape(side, side))
        return schemas.ClassAttention(
            tokens=list(names), layers=[_weights(w) for w in weights], rollout=rollout
        )


# ------------------------------------------------------------------------ language modelling
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

    task = "language_modeling"

    def _task_info(self) -> dict[str, Any]:
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

    def prepare(self, request: schemas.GenerateRequest) -> tuple[GenerateWork, int]:
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

    def _generate(self, work: GenerateWork, cancelled: threading.Event) -> schemas.GenerateResponse:
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
        return schemas.GenerateResponse(
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


# ------------------------------------------------------------------------------ forecasting
@dataclass
class ForecastWork:
    history: list[float] | None
    csv: str | None
    column: str | None
    missing: str
    steps: int


class ForecastHandler(Handler):
    """``POST /forecast``: the next values after a series (values, or a CSV's text)."""

    task = "forecasting"

    def _task_info(self) -> dict[str, Any]:
        return {"input": "series", "window": int(self.predictor.window)}

    def prepare(self, request: schemas.ForecastRequest) -> tuple[ForecastWork, int]:
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
        from seqlab.data.series import CsvSettings, parse_series_csv

        fields = CsvSettings('"column" in the request', '"missing" in the request')
        results: list[Any] = []
        for job in jobs:
            w: ForecastWork = job.payload
            try:
                history = w.history
                if history is None:
                    assert w.csv is not None
                    history = parse_series_csv(w.csv, "csv", w.column, w.missing, fields)
                    check(len(history), self.limits, "max_history", "the CSV's rows", 413)
                values = self.predictor.forecast(history, w.steps)
                results.append(
                    schemas.ForecastResponse(
                        model=self.name,
                        window=int(self.predictor.window),
                        history=list(history),
                        forecast=values,
                    )
                )
            except Exception as exc:  # noqa: BLE001 - this job fails alone
                results.append(exc)
        return results


HANDLERS: dict[str, type[Handler]] = {
    h.task: h
    for h in (TranslationHandler, ClassificationHandler, LanguageModelHandler, ForecastHandler)
}


def make_handler(
    name: str, predictor: Any, limits: Limits, engine: str = "auto", quantize: str | None = None
) -> Handler:
    """The handler of ``predictor``'s task."""
    cls = HANDLERS.get(predictor.task)
    if cls is None:
        raise SeqlabError(f"model {name!r}: the server cannot serve task {predictor.task!r}")
    if cls is TranslationHandler:
        return TranslationHandler(name, predictor, limits, engine, quantize)
    return cls(name, predictor, limits)
