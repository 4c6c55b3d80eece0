"""The run directory, described once: what ``seqlab train`` writes and everything else reads.

A run directory is a complete model (a trained one is all :func:`seqlab.load` needs)::

    RUN_DIR/
      run.json                     the marker: format, training precision (and why), machine
      config.yaml                  the resolved experiment config
      vocab*.json, tokenizer*, …   the task's artefacts (each task's ``ARTEFACTS``), written once
      metrics.jsonl, curves.png    one JSON object per log line; the training curves
      checkpoints/
        step-00001200/             model.safetensors, optimizer.safetensors, rank0.safetensors,
                                   meta.json (see seqlab.storage.checkpoints)
        latest.json, best.json     {"step": ...} pointers, replaced atomically
      exports/ctranslate2-step-…   the model exported for another engine, once per checkpoint
      .lock                        held by the one process writing the run (RunLock)

:class:`RunDir` names these files and answers every question about them: is this a seqlab run,
which checkpoint is ``best``/``latest``/step N, which training precision it recorded, may a new run
go here, may an earlier run here be replaced. What is inside ``checkpoints/`` (the step folders,
their files, the pointers) is named in one place, :mod:`seqlab.storage.checkpoints`, which
writes and reads them; :class:`RunDir` asks it. Training (:mod:`seqlab.experiment`), loading
(:func:`seqlab.load`), the demos and export all go through it. This module sits below both
``tasks/`` and ``training/`` and imports neither: the task artefacts it must know are passed in
(``seqlab.tasks.artefacts()``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from seqlab.atomic import atomic_write_json
from seqlab.config import ExperimentConfig, load_config, save_config
from seqlab.errors import CheckpointError, ConfigError, SeqlabError
from seqlab.storage import checkpoints, training_state
from seqlab.storage.training_state import TrainingState

LOCK_NAME = ".lock"


# --------------------------------------------------------------------------------- the lock
def _holder(fd: int) -> str:
    """The pid written by the process holding the lock, as text ('' if unknown)."""
    with contextlib.suppress(OSError):
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
        if text.isdigit():
            return text
    return ""


class RunLock:
    """One writer per run directory: an exclusive ``flock`` on ``RUN_DIR/.lock``.

    Two processes training or resuming the same run at once would each write checkpoints, metrics
    and the config, and the run would end up holding a mix of both. ``seqlab train`` therefore
    takes the lock (:meth:`acquire`) before it writes anything and holds it until it ends (or
    until :meth:`release`, or the end of the ``with`` block); a second ``train``/``--resume``
    fails at once, naming the process holding it. The lock belongs to the open file, so the operating system releases it when the
    process ends, however it ends (Ctrl-C, a crash, kill -9): a stale lock file never blocks a
    run. Readers (translate, evaluate, export) do not take it.
    """

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_NAME
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock, or fail now.

        Raises:
            SeqlabError: another process trains or resumes the run (its pid named when known),
                or the lock file cannot be created (e.g. a read-only run directory).
        """
        if self._fd is not None:
            return
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise SeqlabError(
                    f"{self.path} is a symbolic link; seqlab's lock file must not be"
                ) from None
            raise SeqlabError(
                f"cannot write into the run directory {self.run_dir} ({exc.strerror}); make it "
                "writable or free some space"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _holder(fd)
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise SeqlabError(f"cannot lock {self.path} ({exc.strerror})") from None
            raise SeqlabError(
                f"{self.run_dir} is being written by another seqlab process"
                f"{f' (pid {holder})' if holder else ''}, training or resuming it; a run "
                "directory has one writer at a time: wait for it to finish, or stop it, then "
                "try again"
            ) from None
        self._fd = fd
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # releases the lock

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


# ------------------------------------------------------------------------ an opened run
@dataclass(frozen=True)
class Run:
    """A trained run directory opened for inference: its config and the checkpoint chosen
    (:meth:`RunDir.open`)."""

    run_dir: Path
    cfg: ExperimentConfig
    checkpoint: Path
    state: TrainingState  #: what the checkpoint records of training (and the task's facts)

    def file(self, name: str) -> Path:
        """An artefact the run must hold; a clear error if it is missing."""
        path = self.run_dir / name
        if not path.is_file():
            raise CheckpointError(
                f"{path} is missing: {self.run_dir} is not a complete run directory (a run needs "
                "its own vocabularies and tokenizers; they are never rebuilt from data)"
            )
        return path

    @property
    def metrics(self) -> dict[str, float]:
        """The validation metrics (``val_…``, finite ones) recorded at the checkpoint's step in
        its training history, or at the last evaluation when that step has none."""
        history = self.state.history
        record = next((h for h in history if h.get("step") == self.state.step), None)
        if record is None and history:
            record = history[-1]
        return {
            k: float(v)
            for k, v in (record or {}).items()
            if k.startswith("val_")
            and isinstance(v, int | float)
            and not isinstance(v, bool)
            and math.isfinite(v)
        }

    def check_size(self, key: str, value: int) -> None:
        """The checkpoint was trained with the same ``key`` (e.g. vocabulary size)."""
        stored = self.state.facts.get(key)
        if stored is not None and stored != value:
            raise CheckpointError(
                f"{self.checkpoint}: trained with {key}={stored}, but the run's files give "
                f"{value}; the run directory's artefacts do not belong to this checkpoint"
            )


# ------------------------------------------------------------------------ the directory
class RunDir:
    """A run directory: the names of its files and what can be asked of them (module docstring).

    Args:
        path: the directory (it need not exist yet: a new run checks it with :meth:`check_new`).
    """

    FORMAT = "seqlab.run/1"  #: ``run.json``'s ``format``: the marker of a seqlab run
    MARKER = "run.json"
    CONFIG = "config.yaml"
    METRICS = "metrics.jsonl"
    CURVES = "curves.png"
    CHECKPOINTS = checkpoints.FOLDER
    EXPORTS = "exports"
    LOCK = LOCK_NAME
    #: what seqlab writes into every run, besides the task's artefacts
    FILES = frozenset({MARKER, CONFIG, METRICS, CURVES, CHECKPOINTS, EXPORTS, LOCK})

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    @property
    def config_path(self) -> Path:
        return self.path / self.CONFIG

    @property
    def metrics_path(self) -> Path:
        return self.path / self.METRICS

    @property
    def curves_path(self) -> Path:
        return self.path / self.CURVES

    @property
    def checkpoints(self) -> Path:
        """The folder of the checkpoints and their ``latest``/``best`` pointers."""
        return checkpoints.folder(self.path)

    # ----------------------------------------------------------------------- the marker
    def read_marker(self) -> dict[str, Any] | None:
        """``run.json`` (marker, training precision, machine), or None if it is not one."""
        try:
            info = json.loads((self.path / self.MARKER).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(info, dict) or info.get("format") != self.FORMAT:
            return None
        return info

    def write_marker(self, info: dict[str, Any]) -> None:
        """Write ``run.json``: the marker and ``info`` (the training precision, the machine)."""
        atomic_write_json(self.path / self.MARKER, {"format": self.FORMAT, **info})

    def is_run(self) -> bool:
        """Whether ``seqlab train`` created this directory (it holds the ``run.json`` marker)."""
        return self.read_marker() is not None

    def holds_training_files(self) -> bool:
        """Whether anything of a training run is here (a ``run.json``, valid or not, or
        ``checkpoints/``): nothing that replaces a folder as a whole may take it."""
        return (self.path / self.MARKER).is_file() or self.checkpoints.is_dir()

    def recorded_precision(self) -> str | None:
        """The training precision the run recorded: ``run.json``, else its latest checkpoint."""
        info = self.read_marker() or {}
        recorded = (info.get("precision") or {}).get("train")
        if recorded is None and self.steps():
            recorded = training_state.read(self.checkpoint("latest")).precision
        return recorded

    # ----------------------------------------------------------------------- the config
    def read_config(self, overrides: list[str] | None = None) -> ExperimentConfig:
        """The run's ``config.yaml`` (with ``overrides``).

        Raises:
            CheckpointError: the directory or its config is missing.
        """
        if not self.path.is_dir():
            raise CheckpointError(f"run directory not found: {self.path}")
        if not self.config_path.is_file():
            raise CheckpointError(f"{self.path} is not a seqlab run directory (no {self.CONFIG})")
        return load_config(self.config_path, overrides)

    def write_config(self, cfg: ExperimentConfig) -> None:
        save_config(cfg, self.config_path)

    # ------------------------------------------------------------------- the checkpoints
    # where the checkpoints are and which is which: :mod:`seqlab.storage.checkpoints`, asked
    def step_dir(self, step: int) -> Path:
        """The folder of the checkpoint saved at ``step`` (it may not exist)."""
        return checkpoints.step_dir(self.path, step)

    def steps(self) -> list[int]:
        """The steps of the complete checkpoints kept, in order."""
        return checkpoints.steps(self.path)

    def is_average(self, step: int) -> bool:
        """Whether the checkpoint of ``step`` is an end-of-training average
        (:func:`seqlab.storage.checkpoints.is_average`)."""
        return checkpoints.is_average(self.path, step)

    def resume_checkpoint(self) -> Path:
        """The checkpoint a resumed run continues from
        (:func:`seqlab.storage.checkpoints.resume_from`)."""
        return checkpoints.resume_from(self.path)

    def pointer(self, which: str) -> int | None:
        """The step ``latest.json`` or ``best.json`` points to, None if there is none
        (:func:`seqlab.storage.checkpoints.pointer`)."""
        return checkpoints.pointer(self.path, which)

    def checkpoint(self, which: str = "best") -> Path:
        """The folder of the ``best`` or ``latest`` checkpoint (``which`` may be a step;
        :func:`seqlab.storage.checkpoints.find`)."""
        return checkpoints.find(self.path, which)

    def open(self, which: str = "best") -> Run:
        """The run's config and its ``best``/``latest``/numbered checkpoint, for inference.

        Raises:
            CheckpointError: not a run directory, no such checkpoint, or a checkpoint written for
                another architecture than the config's.
        """
        cfg = self.read_config()
        path = self.checkpoint(which)
        state = training_state.read(path)
        if state.facts.get("arch") != cfg.model.arch:
            raise CheckpointError(
                f"{path}: written for model.arch={state.facts.get('arch')!r}, but "
                f"{self.config_path} says {cfg.model.arch!r}"
            )
        return Run(self.path, cfg, path, state)

    # ----------------------------------------------------------------------- the exports
    def export_dir(self, engine: str, checkpoint: Path) -> Path:
        """Where ``checkpoint`` exported for ``engine`` (``ctranslate2``) is kept."""
        return self.path / self.EXPORTS / f"{engine}-{checkpoint.name}"

    # ------------------------------------------------------------------------- the lock
    def lock(self) -> RunLock:
        """The lock the one writer of the run holds (not yet acquired)."""
        return RunLock(self.path)

    # ------------------------------------------------------------ a new run, an earlier run
    def foreign_files(self, artefacts: Iterable[str], also: Iterable[str] = ()) -> list[str]:
        """The names here that seqlab did not write: not a run file, not one of the task
        ``artefacts``, and matching none of the ``also`` patterns (``attention-*.png``)."""
        known = self.FILES | set(artefacts)
        patterns = tuple(also)
        return sorted(
            p.name
            for p in self.path.iterdir()
            if p.name not in known and not any(fnmatch(p.name, pat) for pat in patterns)
        )

    def check_new(self, artefacts: Iterable[str]) -> None:
        """Refuse a directory that holds anything but a seqlab run without checkpoints.

        ``artefacts``: every file a task may write (``seqlab.tasks.artefacts()``).

        Raises:
            ConfigError: naming the directory and what is in the way (nothing is written).
        """
        run_dir = self.path
        if run_dir.exists() and not run_dir.is_dir():
            raise ConfigError(f"--out {run_dir} exists and is not a directory")
        if self.steps():
            raise ConfigError(
                f"{run_dir} already holds checkpoints; pass --resume {run_dir} to continue it, "
                "or choose another --out"
            )
        if run_dir.is_dir():
            entries = sorted(p.name for p in run_dir.iterdir() if p.name != self.LOCK)
            foreign = self.foreign_files(artefacts)
            if entries and (foreign or not self.is_run()):
                shown = ", ".join((foreign or entries)[:5]) + (", ..." if len(entries) > 5 else "")
                raise ConfigError(
                    f"--out {run_dir} is not empty and not a seqlab run ({shown}); choose a new "
                    "or empty directory (nothing was written)"
                )
        probe = run_dir
        while not probe.exists():
            probe = probe.parent
        if not os.access(probe, os.W_OK | os.X_OK):
            raise ConfigError(f"--out {run_dir}: cannot write into {probe}")

    def clear(
        self, artefacts: Iterable[str], also: Iterable[str] = (), what: str = "seqlab run"
    ) -> None:
        """Remove an earlier run here (nothing if the directory does not exist), so that a new
        one can take its place; refuse anything else, deleting nothing.

        Args:
            artefacts: every file a task may write (``seqlab.tasks.artefacts()``).
            also: patterns of further files the caller wrote (a demo's ``attention-*.png``).
            what: what an earlier run here is, for the messages (``demo run``).

        Raises:
            ConfigError: not a seqlab run, or it holds files seqlab did not write.
            SeqlabError: another process is writing the run right now.
        """
        if not self.path.exists():
            return
        if not self.path.is_dir() or not self.is_run():
            raise ConfigError(
                f"{self.path} exists and is not an earlier {what} (no seqlab {self.MARKER}); "
                "choose another --out (nothing was deleted)"
            )
        foreign = self.foreign_files(artefacts, also)
        if foreign:
            raise ConfigError(
                f"{self.path} holds files the {what} did not write ({', '.join(foreign[:5])}); "
                "choose another --out (nothing was deleted)"
            )
        with self.lock():  # not a run that another process is training right now
            shutil.rmtree(self.path)
