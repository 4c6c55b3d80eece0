"""Train an experiment into a run directory, or continue one: the pipeline behind ``seqlab train``.

Order matters, so that a mistake never costs the user anything: everything is checked and loaded
first (the config, the run directory, the data, the checkpoint to resume), and files are written
last. A new run goes only into a new or empty directory, or one that holds a seqlab run (marked by
``run.json``) that never saved a checkpoint; a resumed run accepts only the overrides it can
honour (:data:`RESUMABLE`). A run directory has one writer at a time
(:class:`~seqlab.storage.rundir.RunLock`, held from the first write to the end). What a run directory
holds, and which directories a new run may take, is :class:`~seqlab.storage.rundir.RunDir`. A relative
``data.path`` is stored as an absolute path, so the run can be evaluated and resumed from any
directory. A full disk or a read-only run directory stops training with one line saying which
checkpoint is intact and how to continue; no unfinished checkpoint folder is left behind.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import Any

from seqlab.atomic import WRITE_ERRNOS
from seqlab.config import ExperimentConfig
from seqlab.errors import ConfigError, SeqlabError
from seqlab.runtime.device import describe_device, resolve_device
from seqlab.runtime.machine import machine, set_threads
from seqlab.runtime.precision import resume_precision
from seqlab.storage import checkpoints as ckpt
from seqlab.storage.outputs import run_artefacts
from seqlab.storage.rundir import RunDir, RunLock
from seqlab.tasks import build_experiment, task_of
from seqlab.training import distributed as dist
from seqlab.training.callbacks import CurvePlot, MetricsLog, ProgressBar, append_record
from seqlab.training.trainer import Callback, Trainer

#: overrides allowed with ``--resume``: budgets, bookkeeping, the learning rate (applied from the
#: next step on, the schedule's shape kept) and decoding. Anything else would not take effect or
#: would not match the checkpoint.
RESUMABLE = (
    "train.epochs",
    "train.max_steps",
    "train.max_minutes",
    "train.lr",
    "train.log_every",
    "train.eval_every",
    "train.save_every",
    "train.keep_last",
    "train.early_stopping_patience",
    "train.average_last",
    "train.threads",
    "train.device",
    "train.compile",
    "train.precision",
    "decode.*",
)


def resume_config(run_dir: Path, overrides: list[str]) -> ExperimentConfig:
    """The run's own config with the overrides a resumed run can honour."""
    if not RunDir(run_dir).config_path.is_file():
        raise ConfigError(
            f"--resume {run_dir}: no config.yaml there; is it a seqlab run directory?"
        )
    for item in overrides:
        key = item.split("=", 1)[0].strip()
        if key not in RESUMABLE and not (key.startswith("decode.") and "decode.*" in RESUMABLE):
            raise ConfigError(
                f"--resume cannot change {key}: the checkpoint was trained with the run's own "
                f"value; allowed on resume: {', '.join(RESUMABLE)}"
            )
    return RunDir(run_dir).read_config(overrides)


def run_json(trainer: Trainer) -> dict[str, Any]:
    """What ``run.json`` records besides the marker (:meth:`~seqlab.storage.rundir.RunDir.write_marker`):
    the training precision (and why), the device and the machine it ran on."""
    return {
        "device": describe_device(trainer.device),
        "precision": {
            "train": trainer.precision.precision,
            "train_reason": trainer.precision.reason,
            "eval": trainer.eval_precision.precision,
        },
        "machine": machine(trainer.precision.precision),
    }


def absolute_data_path(cfg: ExperimentConfig) -> ExperimentConfig:
    """``cfg`` with a relative ``data.path`` made absolute (it is read from the current
    directory), so that the saved config works from any directory."""
    path = cfg.data.path
    if path is None or os.path.isabs(path):
        return cfg
    data = cfg.data.model_copy(update={"path": os.path.abspath(path)})
    return cfg.model_copy(update={"data": data})


def _write_failed(run_dir: Path, exc: OSError) -> SeqlabError:
    """One line for a full disk or a read-only run directory: what is safe, how to continue."""
    latest = None
    with contextlib.suppress(SeqlabError):
        latest = RunDir(run_dir).pointer("latest")
    if latest is not None:
        where = RunDir(run_dir).step_dir(latest)
        then = (
            f"the last complete checkpoint, {where}, is intact; free some space (or make "
            f"{run_dir} writable) and continue with: seqlab train --resume {run_dir}"
        )
    else:
        then = (
            f"no checkpoint was saved; free some space (or make {run_dir} writable) and run the "
            "same seqlab train command again"
        )
    return SeqlabError(
        f"cannot write {exc.filename or run_dir}: {exc.strerror}; training stopped, {then}"
    )


def _is_write_error(exc: OSError, run_dir: Path) -> bool:
    if exc.errno not in WRITE_ERRNOS:
        return False
    if exc.errno in (errno.EACCES, errno.EPERM):  # also a data file we may not read
        return exc.filename is not None and Path(os.path.abspath(exc.filename)).is_relative_to(
            os.path.abspath(run_dir)
        )
    return True


def train(
    cfg: ExperimentConfig | None,
    run_dir: str | Path,
    resume: bool = False,
    overrides: list[str] | None = None,
    callbacks: list[Callback] | None = None,
) -> dict[str, Any]:
    """Train ``cfg`` into ``run_dir``, or continue the run there when ``resume``.

    Raises:
        SeqlabError: among others, when another process writes the run (one writer at a time),
            or the disk is full or the run directory read-only (saying what is intact).
    """
    run_dir = Path(run_dir)
    lock = RunDir(run_dir).lock()
    try:
        if resume and dist.is_main() and RunDir(run_dir).config_path.is_file():
            lock.acquire()  # before reading the run: the state read is the state continued
        return _train(cfg, run_dir, resume, overrides, callbacks, lock)
    except OSError as exc:
        if not _is_write_error(exc, run_dir):
            raise
        raise _write_failed(run_dir, exc) from None
    finally:
        if lock.held:  # this process wrote the run: no one else's folders are in the way
            ckpt.remove_temporary(run_dir)
        lock.release()


def _train(
    cfg: ExperimentConfig | None,
    run_dir: Path,
    resume: bool,
    overrides: list[str] | None,
    callbacks: list[Callback] | None,
    lock: RunLock,
) -> dict[str, Any]:
    run = RunDir(run_dir)
    if resume:
        cfg = resume_config(run_dir, overrides or [])
    elif cfg is None:
        raise ConfigError("a new run needs a config")
    else:
        run.check_new(_artefacts(cfg, run_dir))
        cfg = absolute_data_path(cfg)
    if cfg.train.threads:
        set_threads(cfg.train.threads, "train.threads")
    precision = None
    if resume:
        overridden = any(o.split("=", 1)[0].strip() == "train.precision" for o in overrides or [])
        device = resolve_device(cfg.train.device, "train.device")
        try:
            precision = resume_precision(
                run.recorded_precision(), cfg.train.precision, overridden, device
            )
        except ConfigError as exc:
            raise ConfigError(f"--resume {run_dir}: {exc}") from None
    exp = build_experiment(cfg, run_dir if resume else None)
    metrics = run.metrics_path
    trainer = Trainer(
        exp.model,
        exp.loss_fn,
        exp.train_batches,
        cfg.train,
        run_dir,
        evaluate=exp.evaluate,
        select=exp.select,
        final_evaluate=exp.final_evaluate,
        callbacks=[
            ProgressBar(unit=exp.unit, perplexity=exp.perplexity),
            MetricsLog(metrics, unit=exp.unit, perplexity=exp.perplexity),
            CurvePlot(metrics, run.curves_path, perplexity=exp.perplexity),
            *(callbacks or []),
        ],
        extra_meta={"arch": cfg.model.arch, **exp.meta},
        eval_precision=cfg.decode.precision,
        precision=precision,
    )
    try:
        if resume:
            trainer.restore(run.resume_checkpoint())
        if dist.is_main():  # everything is loaded: now write
            run_dir.mkdir(parents=True, exist_ok=True)
            if not resume:
                lock.acquire()
                run.check_new(
                    _artefacts(cfg, run_dir)
                )  # again, locked: no other run began here meanwhile
            run.write_marker(run_json(trainer))
            run.write_config(cfg)
            if not resume:
                exp.save_artefacts(run_dir)
        dist.barrier()
        summary = trainer.fit()
        if cfg.train.average_last > 1:
            summary["averaged"] = trainer.average_last(cfg.train.average_last)
            if dist.is_main():
                append_record(metrics, "average", summary["averaged"])
        if exp.finish is not None and dist.is_main():
            summary.update(exp.finish(run_dir))
        # leave together: a gloo process whose peer tears the group down while it still
        # finishes rank-0 work can abort at exit ("terminate called without an active exception")
        dist.barrier()
    finally:
        trainer.close()
        dist.teardown()
    return summary


def _artefacts(cfg: ExperimentConfig, run_dir: Path) -> set[str]:
    """The files a new run of ``cfg`` may find in ``run_dir`` besides the run's own: its task's,
    and those of the earlier run there without checkpoints (its own task's, from its config).
    Asked of these tasks alone: training one task imports no other."""
    names = set(task_of(cfg).artefacts)
    if (Path(run_dir) / RunDir.CONFIG).is_file():
        names |= run_artefacts(run_dir)
    return names
