"""Micro-batching: requests from different clients decoded together, off the event loop.

Each model has one :class:`Batcher`: a bounded queue and its worker threads (one, or as many
as the model's engine decodes batches at once). A request handler
(on the asyncio event loop) puts a :class:`Job` in the queue and awaits its future; the worker
takes the first job waiting and, while the server is busy, keeps taking jobs for up to
``batch_wait_ms`` milliseconds or until ``max_batch`` texts or the jobs it expects (those queued
when the last batch ended and the ones that batch answered) are gathered (a lone request runs at
once), runs them as one batch (the model's handler groups them by decoding options) and hands
each job its own result back on the event loop. While a batch runs, the next requests queue up:
under load, batches fill by themselves. The event loop
never runs a model, so ``/health`` answers while a long batch runs; PyTorch releases the GIL
inside its operators, so the loop keeps serving.

A full queue refuses new jobs at once (:class:`QueueFull`, answered 503 with ``Retry-After``)
rather than letting clients wait without bound; a job whose client stopped waiting (its time
limit passed) is skipped if it has not started. Closing the batcher lets the worker finish every
job already queued, then stops it.

This replaces the one-request-at-a-time lock of OpenNMT-py's REST server, whose clients queue
behind each other's whole translations; batching is what makes the server's sentences per
second approach offline batch translation.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


class QueueFull(Exception):
    """The model's queue holds ``max_queue`` jobs already."""


class Flag:
    """A flag one thread sets and another reads (what ``threading.Event`` offers without its
    lock and condition, which nothing here waits on: built per request, it costs)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = False

    def set(self) -> None:
        self.value = True

    def is_set(self) -> bool:
        return self.value


@dataclass(eq=False)
class Job:
    """One request's work: its payload, its size in texts, and where its answer goes.

    ``cancelled`` is set when the client stopped waiting: the worker skips the job if it has not
    started, and a streaming job stops at its next token.
    """

    payload: Any
    size: int
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    cancelled: Flag = field(default_factory=Flag)


def _settle(answers: list[tuple[asyncio.Future[Any], Any]]) -> None:
    """Give each future its result (on the event loop: one call for a whole batch)."""
    for future, result in answers:
        if future.done():  # the client gave up (time limit): nobody is waiting
            continue
        if isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)


class Batcher:
    """A bounded queue of jobs and the worker thread that runs them in batches.

    Args:
        name: for the thread's name.
        run: called on the worker thread with a batch of jobs; returns one result (or an
            exception, given to that job alone) per job, in order. An exception raised by
            ``run`` goes to every job of the batch.
        max_batch: texts per batch (a single larger job still runs, alone).
        wait_s: how long a batch waits for more jobs after its first, when others are
            queued already.
        max_queue: jobs waiting; :meth:`submit` raises :class:`QueueFull` beyond it.
        workers: worker threads, each taking and running its own batches (for an engine that
            decodes that many batches at once, such as CTranslate2 with ``inter_threads``).
    """

    def __init__(
        self,
        name: str,
        run: Callable[[Sequence[Job]], Sequence[Any]],
        *,
        max_batch: int,
        wait_s: float,
        max_queue: int,
        workers: int = 1,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers}")
        self.name, self._run = name, run
        self.max_batch, self.wait_s, self.workers = max_batch, wait_s, workers
        self._queue: queue.Queue[Job | None] = queue.Queue(max_queue)
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False
        self.batches = 0  # batches run so far (for tests and /health)
        self.texts = 0  # texts in them: texts / batches is the mean batch size

    @property
    def queued(self) -> int:
        """Jobs waiting (not yet taken by the worker)."""
        return self._queue.qsize()

    def submit(self, payload: Any, size: int = 1) -> Job:
        """Queue a job from the running event loop; await ``job.future`` for its result.

        Raises:
            QueueFull: ``max_queue`` jobs are waiting already.
            RuntimeError: the batcher is closed (the server is shutting down).
        """
        loop = asyncio.get_running_loop()
        job = Job(payload, max(size, 1), loop, loop.create_future())
        with self._lock:
            if self._closed:
                raise RuntimeError("the server is shutting down")
            if not self._threads:
                self._threads = [
                    threading.Thread(
                        target=self._work, name=f"seqlab-serve-{self.name}-{k}", daemon=True
                    )
                    for k in range(self.workers)
                ]
                for thread in self._threads:
                    thread.start()
            try:
                self._queue.put_nowait(job)
            except queue.Full:
                raise QueueFull(self.name) from None
        return job

    def close(self, timeout: float | None = None) -> None:
        """Refuse new jobs, let the workers finish the queued ones, and stop them."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = list(self._threads)
        for _ in threads:  # after every queued job; blocks while the queue is full
            self._queue.put(None)
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in threads:
            thread.join(None if deadline is None else max(deadline - time.monotonic(), 0.0))

    # ------------------------------------------------------------------ worker thread
    def _work(self) -> None:
        carried: Job | None = None  # a job that did not fit the previous batch
        stop = False
        # jobs likely in the next batch (those queued when the last batch ended plus the ones
        # it answered, whose clients send again), and when that batch ended
        expect, finished = 0, 0.0
        while not stop:
            first = carried if carried is not None else self._queue.get()
            carried = None
            if first is None:
                break
            batch, texts = [first], first.size
            # A batch waits for more (up to wait_s) only while the server is busy: for the
            # jobs that were queued when the last batch ended and for its clients, who send
            # again at once, if that batch ended moments ago. A lone request runs at once, so
            # one client pays no batching delay; under load, batches fill instead of
            # alternating between the clients answered and those left waiting.
            fresh = time.monotonic() - finished <= self.wait_s
            want = max(self._queue.qsize() + 1, expect if fresh else 0)
            deadline = time.monotonic() + (self.wait_s if want > 1 else 0.0)
            while texts < self.max_batch:
                remaining = deadline - time.monotonic()
                try:
                    if remaining > 0 and len(batch) < want:
                        job = self._queue.get(timeout=remaining)
                    else:  # past the wait, or all expected here: only what is queued already
                        job = self._queue.get_nowait()
                except queue.Empty:
                    break
                if job is None:  # close(): run this batch, then stop
                    stop = True
                    break
                if texts + job.size > self.max_batch:
                    carried = job
                    break
                batch.append(job)
                texts += job.size
            live = [job for job in batch if not job.cancelled.is_set()]
            if live:
                self._run_batch(live)
            # (the jobs queued now go to whichever worker is free: this one's share)
            expect = len(live) + (carried is not None) + self._queue.qsize() // self.workers
            finished = time.monotonic()

    def _run_batch(self, batch: list[Job]) -> None:
        try:
            results = list(self._run(batch))
            if len(results) != len(batch):
                raise RuntimeError(f"{len(results)} results for {len(batch)} jobs")
        except Exception as exc:  # noqa: BLE001 - every job learns of it
            results = [exc] * len(batch)
        with self._lock:
            self.batches += 1
            self.texts += sum(job.size for job in batch)
        # one wake-up of each event loop per batch, not one per job
        answers: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any]]] = {}
        for job, result in zip(batch, results, strict=True):
            answers.setdefault(job.loop, []).append((job.future, result))
        for loop, settled in answers.items():
            with contextlib.suppress(RuntimeError):  # a closed event loop: nobody to answer
                loop.call_soon_threadsafe(_settle, settled)
