"""Progress bars: drawn on a terminal only, and never inside ``no_progress`` (the server's workers),
whose setting holds for the thread that entered it and no other."""

import io
import math
import sys
import threading

import pytest
import torch
from torch import nn

from seqlab.config import TrainConfig
from seqlab.nn.losses import perplexity
from seqlab.runtime.progress import no_progress, progress
from seqlab.training.callbacks import MetricsLog, ProgressBar, read_metrics
from seqlab.training.trainer import LossOutput, Trainer


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_bars_on_a_terminal_only(monkeypatch):
    terminal, log = Terminal(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert list(progress(range(3), "counting")) == [0, 1, 2]
    assert "counting" in terminal.getvalue()
    monkeypatch.setattr(sys, "stderr", log)
    assert list(progress(range(3), "counting")) == [0, 1, 2]
    assert log.getvalue() == ""


def test_no_progress_hides_the_bars_of_its_own_thread_only(monkeypatch):
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    elsewhere = threading.Thread(target=lambda: list(progress(range(3), "other thread")))
    with no_progress():
        assert list(progress(range(3), "hidden")) == [0, 1, 2]
        elsewhere.start()
        elsewhere.join()
        with no_progress():  # nested blocks: still hidden after the inner one ends
            pass
        list(progress(range(3), "still hidden"))
    list(progress(range(3), "shown again"))
    drawn = terminal.getvalue()
    assert "hidden" not in drawn
    assert "other thread" in drawn and "shown again" in drawn


class _Batches:
    carries_state = False

    def set_epoch(self, epoch):
        pass

    def __len__(self):
        return 2

    def __iter__(self):
        yield from [torch.zeros(1)] * 2


@pytest.mark.parametrize(
    "loss,shown", [(2.0, "ppl 7.39"), (100.0, "ppl >1e6"), (800.0, "ppl >1e6")]
)
def test_training_lines_show_the_real_perplexity(tmp_path, loss, shown):
    model = nn.Linear(1, 1)

    def loss_fn(m, batch, state):
        return LossOutput(m.bias.sum() * 0 + loss, 10, None)

    stream = io.StringIO()
    cfg = TrainConfig(max_steps=1, log_every=1, threads=1, precision="fp32")
    metrics = tmp_path / "metrics.jsonl"
    trainer = Trainer(
        model,
        loss_fn,
        _Batches(),
        cfg,
        tmp_path / "run",
        callbacks=[ProgressBar(stream=stream), MetricsLog(metrics)],
        extra_meta={"arch": "toy"},
    )
    trainer.fit()
    line = next(x for x in stream.getvalue().splitlines() if x.startswith("step"))
    assert f"loss {loss:.4f}" in line and shown in line, line
    record = next(r for r in read_metrics(metrics) if r["kind"] == "train")
    if loss < 700:
        assert record["ppl"] == pytest.approx(math.exp(loss), rel=1e-9)  # never capped
    else:
        assert record["ppl"] is None  # exp(800) is beyond a double: stored as null, not 5e21
    assert perplexity(800.0) == math.inf and perplexity(100.0) > 1e43
