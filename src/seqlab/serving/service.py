"""What a task declares to be served: one route, its request and response, the handler between
them and the task's predictor, and the page's panel (:class:`Service`).

A task's package declares its :class:`Service` once, in its catalog record
(:class:`seqlab.catalog.TaskSpec`), and everything else is derived from it: the server's route
and its OpenAPI schema (:mod:`seqlab.serve.app` names no task), the ``route`` and ``panel`` that
``/models`` reports for each model, and the page's form for it (the task's own panel script, or a
form built from the request's JSON schema when it has none).

The generic :class:`OptionsHandler` serves a task whose request is its inputs and its command's
options model: jobs with equal options are answered by one call of the predictor
(:func:`run_grouped`). A :class:`Handler` shapes requests into calls of the predictor that :func:`seqlab.load` returns,
and its answers into responses. It checks a request against the server's limits and the
predictor's ``check`` (:meth:`Handler.prepare`, on the event loop, cheap), runs a batch of prepared
requests on the batcher's worker thread (:meth:`Handler.run`), and describes its model for
``/models`` (:meth:`Handler.details`). Predictors show no progress bars there
(:func:`seqlab.runtime.progress.no_progress`: the server's standard error is its log), nor warn
of tokens outside the vocabulary (:func:`seqlab.data.vocab.quiet_unknown`): each response lists
them in its ``warnings``.

This module needs pydantic only (no FastAPI), so a task package can declare its service without
the ``serve`` extra installed.
"""

from __future__ import annotations

import base64
import binascii
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import Tensor

from seqlab.data.vocab import quiet_unknown, unknown_messages
from seqlab.errors import SeqlabError
from seqlab.runtime.progress import no_progress
from seqlab.serving.limits import Limits, check
from seqlab.storage.text import check_line_breaks

#: decimals kept of attention weights in responses
WEIGHT_DECIMALS = 4
#: queries × keys
Matrix = list[list[float]]
#: layers × heads × queries × keys
LayerHeads = list[list[Matrix]]


class InputError(SeqlabError):
    """A request this model cannot take (answered 422 with the message)."""


class Cancelled(Exception):
    """The client stopped waiting for a streaming job."""


class Request(BaseModel):
    """The base of every request body: unknown fields and fields of the wrong JSON type are
    refused (422 naming the field; pydantic's strict mode: ``"beam": "5"`` is never read as 5)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    model: str | None = Field(
        None,
        description="the model's name (see /models); may be left out when the server holds one "
        "model of this task",
        max_length=200,
    )


def warnings_field() -> Any:
    """The ``warnings`` field of a response that read text."""
    return Field(
        default_factory=list,
        description="texts holding tokens that the model's vocabulary lacks (read as <unk>), "
        "each named with its tokens: \"text 2: 1 token not in the model's vocabulary, read as "
        "<unk>: 'zzz'\"",
    )


class Job(Protocol):
    """What a handler is given per request (:class:`seqlab.serve.batching.Job`)."""

    payload: Any
    size: int


class Handler:
    """The glue for one task (a subclass per task) around one loaded model.

    Args:
        name: the model's name in requests.
        predictor: what :func:`seqlab.load` returned for its run directory.
        limits: the server's per-request limits.
        settings: the server's settings for its models (``engine``, ``quantize``); a handler
            reads the ones that concern its task.
    """

    #: the options this server bounds more tightly than their model does: field → the limit of
    #: :class:`~seqlab.serving.limits.Limits` that bounds it; checked by :meth:`check_limited`
    #: and written into this server's OpenAPI schema (the page's forms read their bounds there)
    limited: ClassVar[Mapping[str, str]] = {}

    def __init__(
        self, name: str, predictor: Any, limits: Limits, settings: Mapping[str, Any] | None = None
    ) -> None:
        self.name, self.predictor, self.limits = name, predictor, limits
        self.settings = dict(settings or {})
        self.cfg = predictor.cfg

    @property
    def task(self) -> str:
        return str(self.predictor.task)

    @property
    def engine(self) -> str:
        """What runs the model (``seqlab``, ``ctranslate2 int8``), for ``/models``."""
        return "seqlab"

    @property
    def workers(self) -> int:
        """Batches of this model that run at once (the batcher's worker threads)."""
        return 1

    def warm_up(self) -> None:
        """Work done once before serving (e.g. loading an export); errors surface at startup."""

    def check_limited(self, options: Any) -> None:
        """Refuse an option over the server's limit that bounds it (:attr:`limited`): 422,
        naming the limit."""
        for field, limit in self.limited.items():
            value = getattr(options, field, None)
            if value is not None:
                check(value, self.limits, limit, field)

    def details(self) -> dict[str, Any]:
        """What ``/models`` says of this model beyond the common fields (labels, languages,
        decoding settings, the attention it returns)."""
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


@dataclass(frozen=True)
class Work:
    """One request prepared by an :class:`OptionsHandler`: its inputs (read and checked) and its
    options, the command's options model as the request's parse validated it."""

    inputs: Any
    options: Any


class OptionsHandler(Handler):
    """The generic handler: a request is its inputs and the fields of the command's options
    model (:attr:`seqlab.tasks.base.Predictor.command_options`), which the request body
    inherits and pydantic validated when it parsed the body.

    :meth:`prepare` reads the inputs (:meth:`inputs`) and takes the options from the request as
    they are (validated once); :meth:`run` groups the jobs by their options (a frozen model is
    hashable) and answers each group with one call (:meth:`answer`), an error failing that
    group's jobs alone (:func:`run_grouped`). A task writes :meth:`inputs` and :meth:`answer`,
    and :meth:`check` for its limits. Every task's handler is one; a command without an options
    model (:attr:`command` naming none, as the classifiers') has its jobs in one group.
    """

    #: the command whose options the request carries (``forecast``)
    command: ClassVar[str] = ""

    def options(self, request: Any) -> Any:
        """The options ``request`` holds, taken as they are (not checked again)."""
        model = self.predictor.command_options.get(self.command)
        return None if model is None else model.taken_from(request)

    def inputs(self, request: Any) -> tuple[Any, int]:
        """The request's inputs, read and checked, and their size in texts: its ``text`` (one
        text or a list, :func:`read_texts`) unless a task says otherwise."""
        texts = read_texts(request.text, self.limits)
        return texts, len(texts)

    def check(self, inputs: Any, options: Any) -> None:
        """Refuse what this server's limits or this model cannot take, before queuing."""

    def prepare(self, request: Any) -> tuple[Work, int]:
        inputs, size = self.inputs(request)
        options = self.options(request)
        self.check(inputs, options)
        return Work(inputs, options), size

    def run(self, jobs: Sequence[Job]) -> list[Any]:
        return run_grouped(
            jobs, lambda works: self.answer([w.inputs for w in works], works[0].options)
        )

    def answer(self, inputs: list[Any], options: Any) -> list[Any]:
        """The responses to the jobs of one group (their ``inputs``, in order; the ``options``
        they share): one response, or an exception failing that job, per job."""
        raise NotImplementedError


def run_grouped(
    jobs: Sequence[Job],
    answer: Callable[[list[Any]], list[Any]],
    key: Callable[[Any], Any] = lambda work: work.options,
) -> list[Any]:
    """Jobs whose payloads have equal ``key`` (their options) answered together, by one call of
    ``answer(payloads)`` per group; an exception raised by a call fails that group's jobs
    alone, and one returned in its list fails that job alone."""
    groups: dict[Any, list[int]] = {}
    for i, job in enumerate(jobs):
        groups.setdefault(key(job.payload), []).append(i)
    results: list[Any] = [None] * len(jobs)
    for members in groups.values():
        try:
            answers = answer([jobs[i].payload for i in members])
        except Exception as exc:  # noqa: BLE001 - these jobs fail, the others go on
            answers = [exc] * len(members)
        for i, result in zip(members, answers, strict=True):
            results[i] = result
    return results


def answer_each(inputs: Sequence[Any], answer: Callable[[Any], Any]) -> list[Any]:
    """``answer(item)`` for each job's inputs in turn (an :meth:`OptionsHandler.answer` that
    takes its jobs one by one), an exception failing its own job alone."""
    results: list[Any] = []
    for item in inputs:
        try:
            results.append(answer(item))
        except Exception as exc:  # noqa: BLE001 - this job fails alone
            results.append(exc)
    return results


@dataclass(frozen=True)
class Service:
    """How a task is served: ``POST route`` with a ``request`` body, answered with a
    ``response`` by the task's ``handler``.

    Args:
        route: the path, e.g. ``/translate``.
        request: the request body (a :class:`Request`); its fields and their descriptions are
            the OpenAPI schema and, when the task has no panel script, the page's form.
        response: the response body.
        handler: the :class:`Handler` subclass, built once per served model of the task.
        summary: one line for the OpenAPI schema (``Translate texts``).
        stream: the request's ``stream: true`` asks for server-sent events (the handler's work
            then gets an ``emit`` callback; see :mod:`seqlab.serve.app`).
        panel: an ES module drawing the page's panel for this task (``mount(section, model,
            page)``); None: the page builds a form from the request's schema and shows the JSON
            answer.
    """

    route: str
    request: type[Request]
    response: type[BaseModel]
    handler: type[Handler]
    summary: str = ""
    stream: bool = False
    panel: Path | None = None
    options: Callable[[], type[BaseModel]] | None = None

    @property
    def body(self) -> type[Request]:
        """The request body as served: ``request``, with the fields of the task's options model
        when ``options`` names one (read when asked: the predictor's model, e.g.
        :class:`~seqlab.tasks.translation.options.TranslateOptions`, which ``request`` inherits;
        a model extended since is served with its new fields)."""
        if self.options is None or issubclass(self.request, self.options()):
            return self.request
        return _extended(self.request, self.options())

    def __post_init__(self) -> None:
        if not self.route.startswith("/") or not self.route[1:].replace("-", "").isalnum():
            raise ValueError(f"a service's route is /name (letters, digits, -), not {self.route!r}")
        if self.panel is not None and not self.panel.is_file():
            raise ValueError(f"the panel script {self.panel} does not exist")


@functools.cache
def _extended(request: type[Request], options: type[BaseModel]) -> type[Request]:
    """``request`` with the fields of ``options`` (a subclass of the options model it inherits),
    under the same name."""
    return type(request.__name__, (request, options), {"__doc__": request.__doc__})


# ----------------------------------------------------------------------------- shared helpers
def weights(x: Tensor) -> list[Any]:
    """Attention weights for the wire: nested lists rounded to :data:`WEIGHT_DECIMALS`."""
    return torch.round(x.detach().float().cpu(), decimals=WEIGHT_DECIMALS).tolist()


def read_texts(value: str | list[str] | None, limits: Limits, what: str = "text") -> list[str]:
    """One text or a list, checked: not empty, within ``max_texts`` and ``max_chars``, holding no
    line break other than ``\\n`` (:func:`seqlab.storage.text.check_line_breaks`)."""
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


def read_base64(value: str, where: str, limits: Limits, example: str) -> bytes:
    """An uploaded file: base64, or a ``data:`` URL (``example``: the one to show, e.g.
    ``data:audio/wav;base64,...``), decoded within ``max_upload_bytes``."""
    if value.startswith("data:"):
        head, _, value = value.partition(",")
        if ";base64" not in head:
            raise InputError(f"{where}: a data: URL must be base64 ({example})")
    check(len(value) * 3 // 4, limits, "max_upload_bytes", f"the size of {where} in bytes", 413)
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InputError(f"{where} is not valid base64") from None


def unknown_warnings(predictor: Any, texts: Sequence[str]) -> list[str]:
    """The ``warnings`` of a response: the tokens of each text (``text 1``, ``text 2``, …) that
    the model's vocabulary lacks, read as ``<unk>``."""
    return unknown_messages(
        (f"text {i}", predictor.unknown_tokens(t)) for i, t in enumerate(texts, start=1)
    )
