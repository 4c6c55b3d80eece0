"""Ctrl-C during training (:class:`CtrlC`): a first one stops training after the step in
progress, with a checkpoint from which a resume is exact
(:meth:`seqlab.training.trainer.Trainer.interrupted`); a second one aborts at once, losing the
steps since the last checkpoint."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from seqlab.errors import TrainingInterrupted
from seqlab.storage import checkpoints as ckpt


class CtrlC:
    """Whether Ctrl-C was pressed (``pressed``) while :meth:`after_step` held SIGINT.

    Attributes:
        pressed: set by the first Ctrl-C; the trainer stops after the step in progress.
    """

    def __init__(self) -> None:
        self.pressed = False

    @contextlib.contextmanager
    def after_step(self, run_dir: Path, step: Callable[[], int]) -> Iterator[None]:
        """A first Ctrl-C sets ``pressed``; a second one aborts with
        :class:`~seqlab.errors.TrainingInterrupted` at the step ``step()`` gives, naming what
        is lost (the steps since ``run_dir``'s latest checkpoint). Off the main thread, where
        no signal handler can be set, nothing changes."""
        self.pressed = False
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum: int, frame: Any) -> None:
            if self.pressed:
                raise KeyboardInterrupt
            self.pressed = True
            print(
                "\nseqlab: Ctrl-C: stopping after this step with a checkpoint "
                "(press Ctrl-C again to abort now)",
                file=sys.stderr,
                flush=True,
            )

        previous = signal.signal(signal.SIGINT, handler)
        try:
            yield
        except KeyboardInterrupt:
            latest = ckpt.pointer(run_dir, "latest")
            lost = f"the steps since step {latest}" if latest is not None else "all steps"
            raise TrainingInterrupted(
                f"aborted at step {step()}; {lost} are lost. "
                f"Resume: seqlab train --resume {run_dir}"
            ) from None
        finally:
            signal.signal(signal.SIGINT, previous)
