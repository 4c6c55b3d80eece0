"""What the server knows about each task: one small handler per task between the HTTP API and
the predictor that :func:`seqlab.load` returns for a run directory.

Everything task-specific of the server is here, so the rest of :mod:`seqlab.serve` (routes,
limits, batching) knows no task: a handler checks a request against the limits and the model
(:meth:`~Handler.prepare`, on the event loop, cheap), runs a batch of prepared requests on the
batcher's worker thread (:meth:`~Handler.run`) and describes its model for ``/models``
(:meth:`~Handler.info`). The predictors' public methods do the work (``hypotheses``,
``probabilities``, ``attention``, ``forecast``); what they do not offer yet is written here
against the models' documented interfaces and tested against the predictors' own results:

- a translation's per-token log-probabilities and every layer's and head's attention come from
  one teacher-forced pass over the chosen output (the search's log-probability is their sum);
- a language model's tokens are produced one at a time, as ``LanguageModel.generate`` produces
  them, so they can be streamed.

Attention weights are rounded to 4 decimals for the wire.
"""

from __future__ import annotations

import base64
import binascii
import importlib.util
import io
import math
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor

from seqlab.errors import SeqlabError
from seqlab.serve import schemas
from seqlab.serve.batching import Job
from seqlab.serve.limits import Limits, check
from seqlab.tokens import BOS, EOS, PAD

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
    """One text or a list, checked: not empty, within ``max_texts`` and ``max_chars``."""
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
    return texts


def _parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def _checkpoint_metrics(meta: dict[str, Any]) -> dict[str, float]:
    """The validation metrics recorded for the loaded checkpoint's step."""
    history = [h for h in meta.get("history") or [] if isinstance(h, dict)]
    record = next((h for h in history if h.get("step") == meta.get("step")), None)
    if record is None and history:
        record = history[-1]
    return {
        k: float(v)
        for k, v in (record or {}).items()
        if k.startswith("val_") and isinstance(v, int | float) and math.isfinite(v)
    }


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

    def warm_up(self) -> None:
        """Work done once before serving (e.g. an export); errors surface at startup."""

    def info(self) -> schemas.ModelInfo:
        run = self.predictor.run
        meta = run.meta if run is not None else {}
        return schemas.ModelInfo(
            name=self.name,
            task=self.task,  # type: ignore[arg-type]
            arch=self.cfg.model.arch,
            dataset=str(self.cfg.data.dataset),
            engine=self.engine,
            parameters=_parameters(self.predictor.model),
            checkpoint_step=meta.get("step"),
            metrics=_checkpoint_metrics(meta),
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


# ------------------------------------------------------------------------------ translation
@dataclass
class TranslateWork:
    texts: list[str]
    beam: int | None
    nbest: int | None
    attention: bool


class TranslationHandler(Handler):
    """``POST /translate``: n-best translations, and on request the attention of the best.

    Args:
        engine: ``auto`` (CTranslate2 for Transformer models when it is installed), ``seqlab``
            or ``ctranslate2`` (required: an error when it is not installed). Models other
            than the Transformer always run on seqlab, and so does every request that asks for
            attention (CTranslate2 returns none).
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
        if engine not in ("auto", "seqlab", "ctranslate2"):
            raise SeqlabError(f"--engine must be auto, seqlab or ctranslate2, not {engine!r}")
        transformer = self.cfg.model.arch == "transformer"
        if engine == "ctranslate2" and transformer:
            from seqlab.export.ctranslate2 import require_ctranslate2

            require_ctranslate2()
        installed = importlib.util.find_spec("ctranslate2") is not None
        use_ct2 = transformer and (engine == "ctranslate2" or (engine == "auto" and installed))
        self.backend = "ctranslate2" if use_ct2 else "pytorch"
        self.quantize = quantize if use_ct2 else None

    @property
    def engine(self) -> str:
        if self.backend == "ctranslate2":
            return f"ctranslate2 {self.quantize}" if self.quantize else "ctranslate2"
        return "seqlab"

    def warm_up(self) -> None:
        if self.backend == "ctranslate2":  # export into RUN/exports once, and load it
            self.predictor.ctranslate2_engine(self.quantize)

    def _task_info(self) -> dict[str, Any]:
        from seqlab.models.transformer_seq2seq import TransformerSeq2Seq

        d, model = self.cfg.data, self.predictor.model
        kinds: list[str] = []
        if isinstance(model, TransformerSeq2Seq):
            kinds = ["cross", "encoder", "decoder", "alignment"]
        elif self.predictor.has_attention:
            kinds = ["alignment"]
        decode = self.cfg.decode
        return {
            "languages": None
            if d.dataset == "dates"
            else {"source": str(d.src_lang), "target": str(d.tgt_lang)},
            "attention": kinds,
            "decoding": {
                "strategy": decode.strategy,
                "beam_size": decode.beam_size if decode.strategy == "beam" else 1,
                "nbest": decode.nbest,
                "length_penalty": decode.length_penalty,
            },
        }

    def prepare(self, request: schemas.TranslateRequest) -> tuple[TranslateWork, int]:
        from seqlab.tasks.translation import decode_options

        texts = _texts(request.text, self.limits)
        if request.beam is not None:
            check(request.beam, self.limits, "max_beam", "beam")
        if request.nbest is not None:
            check(request.nbest, self.limits, "max_nbest", "nbest")
        decode_options(self.cfg.decode, request.beam, request.nbest)  # nbest > beam: 422
        if request.attention and not self.predictor.has_attention:
            raise InputError(
                f"model {self.name!r} (model.arch={self.cfg.model.arch}) has no attention over "
                "the source: it encodes the source into one vector"
            )
        work = TranslateWork(texts, request.beam, request.nbest, request.attention)
        return work, len(texts)

    def run(self, jobs: Sequence[Job]) -> list[Any]:
        groups: dict[tuple[Any, ...], list[int]] = {}
        for i, job in enumerate(jobs):
            w: TranslateWork = job.payload
            groups.setdefault((w.beam, w.nbest, w.attention), []).append(i)
        results: list[Any] = [None] * len(jobs)
        for (beam, nbest, attention), members in groups.items():
            try:
                answers = self._translate(
                    [jobs[i].payload for i in members], beam, nbest, attention
                )
            except Exception as exc:  # noqa: BLE001 - these jobs fail, the others go on
                answers = [exc] * len(members)
            for i, answer in zip(members, answers, strict=True):
                results[i] = answer
        return results

    def _translate(
        self, works: list[TranslateWork], beam: int | None, nbest: int | None, attention: bool
    ) -> list[schemas.TranslateResponse]:
        p = self.predictor
        texts = [t for w in works for t in w.texts]
        backend = "pytorch" if attention else self.backend
        found = p.hypotheses(
            texts,
            beam=beam,
            nbest=nbest,
            batch_size=self.limits.max_batch,
            engine=backend,
            quantize=self.quantize if backend == "ctranslate2" else None,
        )
        longest = self.cfg.data.max_len - 1
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
                if len(p.vocabs.src_tokenizer.tokenize(text)) > longest:
                    notes.append(
                        f"text {i + 1}: only its first {longest} tokens were read "
                        f"(the model's data.max_len={self.cfg.data.max_len})"
                    )
            start += len(w.texts)
            out.append(
                schemas.TranslateResponse(
                    model=self.name,
                    engine="seqlab" if backend == "pytorch" else self.engine,
                    translations=translations,
                    notes=notes,
                )
            )
        return out

    @torch.no_grad()
    def _detail(self, text: str, tokens: list[int]) -> schemas.AttentionDetail:
        """One teacher-forced pass over ``<bos> tokens``: each target token's log-probability
        (``<pad>`` and ``<bos>`` removed from the distribution, as the search does) and the
        attention weights; for a Transformer every layer and head (Vaswani et al. 2017, §3.2),
        for an RNN its alignment (Bahdanau et al. 2014, §3.1)."""
        from seqlab.models.transformer_seq2seq import TransformerSeq2Seq
        from seqlab.precision import autocast

        p, model = self.predictor, self.predictor.model
        device = next(model.parameters()).device
        src_ids = p.source_ids(text)
        src = torch.tensor([src_ids], device=device)  # (1, S)
        src_len = torch.tensor([len(src_ids)], device=device)  # (1,)
        tgt_in = torch.tensor([[BOS, *tokens]], device=device)  # (1, T)
        targets = torch.tensor([*tokens, EOS])  # (T,)
        layers: dict[str, Any] = {}
        with autocast(p.precision, device):
            if isinstance(model, TransformerSeq2Seq):
                hidden, enc = model.encoder(src, src_len, need_weights=True)  # (1, S, d)
                out = model.decoder(tgt_in, hidden, src_len, need_weights=True)
                logits = model.output(out.hidden)  # (1, T, V)
                alignment = out.cross_attention[model.attention_layer].mean(dim=1)  # (1, T, S)
                layers = {
                    "encoder": [_weights(w[0]) for w in enc],  # L × (h, S, S)
                    "decoder": [_weights(w[0]) for w in out.self_attention],  # L × (h, T, T)
                    "cross": [_weights(w[0]) for w in out.cross_attention],  # L × (h, T, S)
                }
            else:
                memory = model.encode(src, src_len)
                logits, alignment = model.decode(memory, tgt_in, need_weights=True)
        logits = logits.float()[0]  # (T, V)
        logits[:, [PAD, BOS]] = -math.inf
        log_probs = logits.log_softmax(-1).gather(1, targets[:, None].to(device))[:, 0]  # (T,)
        src_vocab, tgt_vocab = p.vocabs.src_vocab, p.vocabs.tgt_vocab
        return schemas.AttentionDetail(
            source_tokens=src_vocab.to_tokens(src_ids),
            target_tokens=tgt_vocab.to_tokens(tokens) + ["<eos>"],
            target_inputs=["<bos>", *tgt_vocab.to_tokens(tokens)],
            log_probs=log_probs.cpu().tolist(),
            alignment=None if alignment is None else _weights(alignment[0]),
            **layers,
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
        kinds = []
        if hasattr(p.model, "attention"):
            kinds = ["self", "rollout"] if p.images else ["self"]
        image = p.classes.image or {}
        return {
            "labels": list(p.labels),
            "input": "image" if p.images else "text",
            "image_size": int(image["size"]) if image else None,
            "attention": kinds,
        }

    def prepare(self, request: schemas.ClassifyRequest) -> tuple[ClassifyWork, int]:
        p = self.predictor
        if request.attention and not hasattr(p.model, "attention"):
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
        from PIL import Image, UnidentifiedImageError

        from seqlab.data.images import load_image

        try:
            with Image.open(io.BytesIO(data)) as img:  # reads the header only
                width, height = img.size
        except (UnidentifiedImageError, OSError):
            raise InputError(f"{where} is not an image file PIL can read") from None
        check(width * height, self.limits, "max_image_pixels", f"{where}'s pixel count", 413)
        image = self.predictor.classes.image
        try:
            return load_image(io.BytesIO(data), int(image["size"]), int(image["channels"]))  # type: ignore[arg-type]
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
        return schemas.ClassifyResponse(model=self.name, results=out)

    def _attention(self, item: str | Tensor) -> schemas.ClassAttention:
        names, weights = self.predictor.attention(item)  # L × (h, T, T)
        rollout = None
        if self.predictor.images:
            from seqlab.models.vit import attention_rollout

            share = attention_rollout([w[None] for w in weights])[0]  # (N,)
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
    strategy: str
    temperature: float
    top_k: int
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
        check(request.tokens, self.limits, "max_tokens", "tokens")
        p = self.predictor
        if len(p.vocab) <= p.vocab.num_reserved:
            raise InputError(f"model {self.name!r}'s vocabulary holds only reserved tokens")
        # the predictor's own reading of the options (the run's decode section unless asked
        # otherwise), so that the server and LanguageModel.generate cannot disagree
        strategy, temp, k = p._sampling(request.temperature, request.top_k)
        return GenerateWork(request.prefix, request.tokens, strategy, temp, k, request.seed), 1

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
        pieces = p.tokenizer.tokenize(work.prefix)
        if not pieces:  # no context: start from the most frequent token, as generate does
            pieces = [p.vocab.to_tokens(p.vocab.num_reserved)]
        ids = list(p.vocab[pieces])
        new: list[int] = []
        for token in self._tokens(ids, work):
            if cancelled.is_set():
                raise Cancelled
            new.append(token)
            if work.emit is not None:
                delta = self._delta(ids + new)
                work.emit({"token": p.vocab.to_tokens(token), "text": delta, "index": len(new)})
        return schemas.GenerateResponse(
            model=self.name,
            text=p.tokenizer.detokenize(p.vocab.to_tokens(ids + new)),
            tokens=[p.vocab.to_tokens(t) for t in new],
        )

    def _delta(self, ids: list[int]) -> str:
        """The text the last of ``ids`` adds, from the last few tokens only (detokenising is
        local: spaces and attached punctuation), so streaming n tokens costs O(n)."""
        detokenize, to_tokens = self.predictor.tokenizer.detokenize, self.predictor.vocab.to_tokens
        for tail in (ids[-STREAM_CONTEXT:], ids):
            before, after = detokenize(to_tokens(tail[:-1])), detokenize(to_tokens(tail))
            if after.startswith(before):
                return after[len(before) :]
        return after

    @torch.no_grad()
    def _tokens(self, ids: list[int], work: GenerateWork) -> Iterator[int]:
        """The tokens ``LanguageModel.generate`` would choose, one at a time: the prefix read
        in one pass, then each token fed back with the recurrent state or the key/value cache
        (re-reading the last ``max_len`` tokens once a Transformer's window is full)."""
        from seqlab.nn.sampling import next_token
        from seqlab.precision import autocast
        from seqlab.tasks.language_modeling import is_recurrent

        model = self.predictor.model
        device = next(model.parameters()).device
        gen = torch.Generator().manual_seed(work.seed)
        reserved = range(self.predictor.vocab.num_reserved)  # never generated, as in generate()
        pick = (work.strategy, work.temperature, work.top_k, gen, reserved)
        with autocast(self.predictor.precision):
            if is_recurrent(model):
                logits, state = model(torch.tensor([ids], device=device))  # (1, P, V)
                for i in range(work.tokens):
                    token = int(next_token(logits[:, -1], *pick))
                    yield token
                    if i + 1 < work.tokens:
                        step = torch.tensor([[token]], device=device)  # (1, 1)
                        logits, state = model(step, state)  # (1, 1, V)
                return
            window = model.max_len
            tokens = torch.tensor([ids], device=device)  # (1, P)
            logits, cache = model(tokens[:, -window:], model.init_cache(1))  # (1, P, V)
            for i in range(work.tokens):
                nxt = next_token(logits[:, -1], *pick)  # (1,)
                yield int(nxt)
                tokens = torch.cat([tokens, nxt[:, None]], dim=1)  # (1, P + i + 1)
                if i + 1 == work.tokens:
                    break
                if cache.length < window:
                    logits, cache = model(nxt[:, None], cache)  # (1, 1, V)
                else:  # window full: re-read the last L tokens from position 0
                    logits, cache = model(tokens[:, -window:], model.init_cache(1))


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
        from seqlab.data.series import parse_series_csv

        results: list[Any] = []
        for job in jobs:
            w: ForecastWork = job.payload
            try:
                history = w.history
                if history is None:
                    assert w.csv is not None
                    history = parse_series_csv(w.csv, "csv", w.column, w.missing)
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
