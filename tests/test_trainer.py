"""Trainer: exact resume after SIGKILL, NaN stop, distributed parity, checkpoint errors."""

import io
import json
import math
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml

from cli_checks import fails, snapshot, write_config
from conftest import tiny_dates_transformer
from precision_helpers import PRECISIONS_BF16_SLOW, assert_close_in
from seqlab import load
from seqlab.cli import main
from seqlab.config import config_from_dict, load_config
from seqlab.errors import CheckpointError, SeqlabError
from seqlab.experiment import train
from seqlab.storage.checkpoints import load_safetensors, read_meta
from seqlab.storage.rundir import RunDir
from seqlab.storage.training_state import TrainingState
from seqlab.training.budget import Budget
from seqlab.training.callbacks import MetricsLog, ProgressBar, read_metrics
from seqlab.training.trainer import Callback, LossOutput, Trainer, TrainingDiverged
from tiny_runs import ToyData, lm_raw

ROOT = Path(__file__).resolve().parents[1]
#: two processes vs one accumulating: the same sums in another order (and, in bf16, matrix
#: products of other shapes, rounded differently)
LOSS_REL = {"fp32": 1e-4, "bf16": 2e-2}
TEXT = (
    "the time traveller for so it will be convenient to speak of him was expounding a recondite matter to us. "
    * 40
)


def tiny_config(tmp_path, **train):
    text = tmp_path / "corpus.txt"
    text.write_text(TEXT)
    raw = {
        "data": {
            "dataset": "text",
            "path": str(text),
            "batch_size": 4,
            "num_steps": 12,
            "sampling": "sequential",
        },
        "model": {
            "arch": "rnn_lm",
            "cell": "gru",
            "embed_dim": 8,
            "hidden_size": 16,
            "num_layers": 2,
            "dropout": 0.1,
        },
        "train": {
            "lr": 3e-3,
            "log_every": 1,
            "eval_every": 5,
            "max_steps": 30,
            "threads": 1,
            "keep_last": 1,
            **train,
        },
    }
    return raw


def losses(run_dir):
    return {
        r["step"]: r["loss"]
        for r in read_metrics(run_dir / "metrics.jsonl")
        if r["kind"] == "train"
    }


KILLER = textwrap.dedent(
    """
    import os, signal, sys, yaml
    from seqlab.config import config_from_dict
    from seqlab.experiment import train
    from seqlab.training.trainer import Callback

    class KillAt(Callback):
        def on_step(self, trainer, loss):
            if trainer.state.step == int(sys.argv[3]):
                os.kill(os.getpid(), signal.SIGKILL)

    cfg = config_from_dict(yaml.safe_load(open(sys.argv[1])))
    train(cfg, sys.argv[2], callbacks=[KillAt()])
    """
)


@pytest.mark.parametrize("precision", PRECISIONS_BF16_SLOW)
def test_resume_after_sigkill_reproduces_uninterrupted_losses(tmp_path, precision):
    raw = tiny_config(tmp_path, precision=precision)
    full = train(config_from_dict(raw), tmp_path / "full")
    assert full["step"] == 30
    expected = losses(tmp_path / "full")
    assert sorted(expected) == list(range(1, 31))

    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(raw))
    (tmp_path / "killer.py").write_text(KILLER)
    proc = subprocess.run(
        [
            sys.executable,
            str(tmp_path / "killer.py"),
            str(tmp_path / "cfg.yaml"),
            str(tmp_path / "cut"),
            "17",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -9, (
        proc.stderr
    )  # killed by SIGKILL, mid-epoch, after the step-15 checkpoint
    assert RunDir(tmp_path / "cut").pointer("latest") == 15
    assert max(losses(tmp_path / "cut")) >= 16  # the killed run had logged past its checkpoint

    summary = train(None, tmp_path / "cut", resume=True)
    assert summary["step"] == 30
    resumed = losses(tmp_path / "cut")
    assert resumed == expected  # bit-identical: same batches, same RNG, same optimizer state
    full_w = load_safetensors(RunDir(tmp_path / "full").checkpoint("latest") / "model.safetensors")
    cut_w = load_safetensors(RunDir(tmp_path / "cut").checkpoint("latest") / "model.safetensors")
    assert all(torch.equal(full_w[k], cut_w[k]) for k in full_w)
    assert (
        json.loads((tmp_path / "cut" / "run.json").read_text())["precision"]["train"] == precision
    )


def test_run_dir_with_checkpoints_is_not_overwritten(tmp_path):
    raw = tiny_config(tmp_path, max_steps=5)
    train(config_from_dict(raw), tmp_path / "run")
    with pytest.raises(Exception, match="already holds checkpoints.*--resume"):
        train(config_from_dict(raw), tmp_path / "run")


def test_log_records_the_mean_gradient_norm_before_clipping_and_the_clipped_fraction(tmp_path):
    def run(name, grad_clip):
        torch.manual_seed(0)
        cfg = config_from_dict(
            {"train": {"max_steps": 7, "log_every": 3, "grad_clip": grad_clip, "eval_every": 7}}
        ).train
        seen = []

        class Norms(Callback):  # after the step: the gradients as the update used them
            def on_step(self, trainer, loss):
                grads = [p.grad.flatten() for p in trainer.model.parameters()]
                seen.append(float(torch.cat(grads).norm()))

        trainer = Trainer(
            torch.nn.Linear(3, 1),
            lambda m, x, state: LossOutput(m(x).pow(2).mean(), x.shape[0]),
            ToyData(),
            cfg,
            tmp_path / name,
            evaluate=lambda m: {"val_loss": 1.0},
            callbacks=[Norms(), MetricsLog(tmp_path / name / "metrics.jsonl")],
        )
        trainer.fit()
        records = [
            r for r in read_metrics(tmp_path / name / "metrics.jsonl") if r["kind"] == "train"
        ]
        return {r["step"]: r for r in records}, seen

    free, norms = run("free", None)  # nothing clipped: the gradients seen are the norms logged
    assert sorted(free) == [1, 3, 6, 7]
    for step, steps in ((1, [1]), (3, [2, 3]), (6, [4, 5, 6]), (7, [7])):
        mean = sum(norms[s - 1] for s in steps) / len(steps)
        assert free[step]["grad_norm"] == pytest.approx(mean, rel=1e-5)
        assert "clipped" not in free[step]
    assert len(set(norms)) == 7 and min(norms) > 0.05

    tight, clipped_norms = run("tight", 0.05)  # every step clipped to 0.05
    assert tight[1]["grad_norm"] == pytest.approx(norms[0], rel=1e-5)  # same weights, same batch
    assert all(r["clipped"] == 1.0 for r in tight.values())
    assert clipped_norms == pytest.approx([0.05] * 7, rel=1e-4)
    loose, _ = run("loose", 1e6)
    assert all(r["clipped"] == 0.0 for r in loose.values())
    assert [r["grad_norm"] for r in loose.values()] == [r["grad_norm"] for r in free.values()]


def test_nan_loss_stops_with_message_and_keeps_last_good_checkpoint(tmp_path):
    model = torch.nn.Linear(3, 1)

    def loss_fn(m, x, state):
        loss = m(x).pow(2).mean()
        if loss_fn.calls == 7:
            loss = loss * float("nan")
            loss_fn.before = m.weight.detach().clone()  # the weights after step 7
        loss_fn.calls += 1
        return LossOutput(loss, x.shape[0])

    loss_fn.calls = 0
    cfg = config_from_dict({"train": {"eval_every": 5, "max_steps": 20, "log_every": 1}}).train
    trainer = Trainer(
        model, loss_fn, ToyData(), cfg, tmp_path, evaluate=lambda m: {"val_loss": 1.0}
    )
    with pytest.raises(TrainingDiverged) as exc:
        trainer.fit()
    msg = str(exc.value)
    assert "loss became nan at step 8" in msg and "step-00000005" in msg and "--resume" in msg
    saved = load_safetensors(tmp_path / "checkpoints" / "step-00000005" / "model.safetensors")
    assert RunDir(tmp_path).steps() == [5]
    # the weights were not touched by the bad step: they still equal those after step 7
    assert torch.equal(model.weight.detach(), loss_fn.before)
    assert not torch.equal(saved["weight"], loss_fn.before)  # step 5's are older


def test_bad_checkpoints_are_refused_with_the_file_named(tmp_path):
    raw = tiny_config(tmp_path, max_steps=5)
    run = tmp_path / "run"
    train(config_from_dict(raw), run)
    path = RunDir(run).checkpoint("latest")
    load(run)  # loads fine

    bad = tmp_path / "truncated"
    shutil.copytree(run, bad)
    weights = RunDir(bad).checkpoint("latest") / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(CheckpointError, match=r"model\.safetensors.*corrupt"):
        load(bad)

    foreign = tmp_path / "foreign"
    shutil.copytree(run, foreign)
    meta = RunDir(foreign).checkpoint("latest") / "meta.json"
    meta.write_text(json.dumps({"format": "someone-else/3"}))
    with pytest.raises(CheckpointError, match="not a seqlab checkpoint"):
        load(foreign)

    other = tmp_path / "other-shape"
    shutil.copytree(run, other)
    cfg = yaml.safe_load((other / "config.yaml").read_text())
    cfg["model"]["hidden_size"] = 24
    (other / "config.yaml").write_text(yaml.safe_dump(cfg))
    with pytest.raises(CheckpointError, match="has shape"):
        load(other)
    assert path.is_dir()


@pytest.mark.skipif(sys.platform != "linux", reason="gloo over loopback")
@pytest.mark.parametrize("precision", PRECISIONS_BF16_SLOW)
def test_two_processes_match_one_process_with_the_same_global_batch(tmp_path, precision):
    raw = tiny_config(tmp_path, max_steps=12, eval_every=6, precision=precision)
    raw["model"]["dropout"] = 0.0
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(raw))
    single = train(config_from_dict(raw), tmp_path / "one")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    torchrun = Path(sys.executable).with_name("torchrun")
    proc = subprocess.run(
        [
            str(torchrun),
            "--standalone",
            "--nproc_per_node=2",
            "-m",
            "seqlab",
            "train",
            str(tmp_path / "cfg.yaml"),
            "--out",
            str(tmp_path / "two"),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    one, two = losses(tmp_path / "one"), losses(tmp_path / "two")
    assert sorted(one) == sorted(two) == list(range(1, 13))
    rel = LOSS_REL[precision]
    for step in one:
        assert two[step] == pytest.approx(one[step], rel=rel, abs=1e-5)
    assert single["step"] == 12


@pytest.mark.skipif(sys.platform != "linux", reason="gloo over loopback")
@pytest.mark.parametrize("precision", PRECISIONS_BF16_SLOW)
def test_two_processes_deal_out_token_batches_like_accumulating_two(tmp_path, precision):
    """Token-budget batches of odd row counts, an odd number per epoch: 2 processes taking whole
    batches (one padded step per epoch) make the updates of 1 process accumulating 2 batches."""
    raw = tiny_dates_transformer(
        data={"batch_tokens": 300},
        train={
            "max_steps": 7,
            "log_every": 1,
            "lr": 3e-3,
            "keep_last": 3,
            "average_last": 3,  # collectives in saving, evaluation on rank 0
            "precision": precision,
        },
    )
    from seqlab.tasks.translation import build_experiment

    batches = build_experiment(config_from_dict(raw)).train_batches
    rows = [len(b) for b in batches]
    assert len(rows) % 2 == 1 and any(r % 2 for r in rows)  # what the test is about
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(raw))
    single = {**raw, "train": {**raw["train"], "accumulate": 2}}
    train(config_from_dict(single), tmp_path / "one")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    torchrun = Path(sys.executable).with_name("torchrun")
    proc = subprocess.run(
        [str(torchrun), "--standalone", "--nproc_per_node=2", "-m", "seqlab", "train"]
        + [str(tmp_path / "cfg.yaml"), "--out", str(tmp_path / "two")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    one, two = losses(tmp_path / "one"), losses(tmp_path / "two")
    assert sorted(one) == sorted(two) == list(range(1, 8))
    for step in one:
        assert two[step] == pytest.approx(one[step], rel=LOSS_REL[precision], abs=1e-5)
    assert RunDir(tmp_path / "two").steps() == RunDir(tmp_path / "one").steps()
    assert RunDir(tmp_path / "two").pointer("best") == RunDir(tmp_path / "one").pointer("best")
    w1 = load_safetensors(RunDir(tmp_path / "one").checkpoint("latest") / "model.safetensors")
    w2 = load_safetensors(RunDir(tmp_path / "two").checkpoint("latest") / "model.safetensors")
    for k in w1:
        assert_close_in(precision, w2[k], w1[k], atol=1e-5, rtol=1e-4)
    assert read_meta(RunDir(tmp_path / "two").checkpoint("latest"))["world_size"] == 2
    assert len(load(tmp_path / "two").translate(["saturday 9 may 1998"])) == 1
    with pytest.raises(CheckpointError, match="world_size=2"):
        train(None, tmp_path / "two", resume=True, overrides=["train.max_steps=9"])


def test_progress_lines_show_perplexity_only_for_token_losses():
    record = {"step": 5, "epoch": 0.5, "loss": 0.25, "ppl": 1.284, "tokens_per_s": 1234.0}
    lines = {}
    for unit, perplexity in (("tok", True), ("ex", False)):
        stream = io.StringIO()
        ProgressBar(stream, unit=unit, perplexity=perplexity).on_log(None, record)
        lines[unit] = stream.getvalue()
    assert "ppl 1.28" in lines["tok"] and "1,234 tok/s" in lines["tok"]
    assert "ppl" not in lines["ex"] and "1,234 ex/s" in lines["ex"]
    assert "gnorm" not in lines["tok"]
    stream = io.StringIO()
    ProgressBar(stream).on_log(None, {**record, "grad_norm": 0.4567})
    assert "ppl 1.28  gnorm 0.46  1,234 tok/s" in stream.getvalue()


def test_metrics_name_the_throughput_by_unit_and_keep_perplexity_for_token_losses(tmp_path):
    record = {"step": 5, "epoch": 0.5, "loss": 0.25, "ppl": 1.284, "tokens_per_s": 1234.0}
    trainer = SimpleNamespace(pos=SimpleNamespace(step=0))
    written = {}
    for unit, perplexity in (("tok", True), ("ex", False)):
        log = MetricsLog(tmp_path / f"{unit}.jsonl", unit=unit, perplexity=perplexity)
        log.on_train_start(trainer)
        log.on_log(trainer, dict(record))
        log.on_train_end(trainer, {"step": 5})
        written[unit] = read_metrics(tmp_path / f"{unit}.jsonl")[0]
    assert written["tok"]["tokens_per_s"] == 1234.0 and written["tok"]["ppl"] == 1.284
    assert written["ex"]["examples_per_s"] == 1234.0
    assert "ppl" not in written["ex"] and "tokens_per_s" not in written["ex"]
    with pytest.raises(ValueError, match="unit must be one of"):
        MetricsLog(tmp_path / "x.jsonl", unit="words")


def test_save_every_adds_unvalidated_checkpoints_that_average_and_resume(tmp_path):
    """``train.save_every``: checkpoints between validations, without validating; the end-of-run
    average takes the last N of the finer grid, and a run resumes exactly from one of them."""
    raw = tiny_config(tmp_path, eval_every=10, save_every=3, keep_last=20, average_last=4)
    full = train(config_from_dict(raw), tmp_path / "full")
    records = read_metrics(tmp_path / "full" / "metrics.jsonl")
    assert [r["step"] for r in records if r["kind"] == "eval"] == [10, 20, 30]
    assert full["averaged"]["steps"] == [21, 24, 27, 30]
    kept = RunDir(tmp_path / "full").steps()
    assert {3, 6, 9, 10, 12, 15, 18, 20, 21, 24, 27, 30} <= set(kept)
    meta = read_meta(RunDir(tmp_path / "full").step_dir(12))
    assert meta["step"] == 12 and len(meta["history"]) == 1  # validated at 10 only

    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(raw))
    (tmp_path / "killer.py").write_text(KILLER)
    args = [str(tmp_path / "cfg.yaml"), str(tmp_path / "cut"), "14"]
    proc = subprocess.run(
        [sys.executable, str(tmp_path / "killer.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -9, proc.stderr
    assert RunDir(tmp_path / "cut").pointer("latest") == 12  # an unvalidated checkpoint
    train(None, tmp_path / "cut", resume=True)
    assert losses(tmp_path / "cut") == losses(tmp_path / "full")


@pytest.mark.parametrize("final_prefers", ["average", "best"])
def test_final_evaluate_alone_chooses_between_the_average_and_the_best(tmp_path, final_prefers):
    """With ``final_evaluate`` (a translation run's beam search), the average of the last
    checkpoints is kept exactly when it beats the best checkpoint there; ``evaluate`` (greedy),
    which here ranks the average last, is only recorded."""
    model = torch.nn.Linear(3, 1)
    cfg = config_from_dict(
        {"train": {"eval_every": 5, "max_steps": 20, "log_every": 5, "keep_last": 4}}
    ).train
    run = RunDir(tmp_path)

    def average_of_last(n):
        states = [load_safetensors(run.step_dir(s) / "model.safetensors") for s in run.steps()]
        return {k: sum(s[k] for s in states[-n:]) / n for k in states[0]}

    seen = []

    def final_evaluate(m):
        avg = average_of_last(4)
        same = all(torch.allclose(p, avg[k]) for k, p in m.state_dict().items())
        seen.append("average" if same else "best")
        return {"val_loss": 0.0 if seen[-1] == final_prefers else 1.0}

    calls = iter(range(100))  # greedy val_loss rises: step 5 is the best, the average worst
    trainer = Trainer(
        model,
        lambda m, x, state: LossOutput(m(x).pow(2).mean(), x.shape[0]),
        ToyData(),
        cfg,
        tmp_path,
        evaluate=lambda m: {"val_loss": float(next(calls))},
        final_evaluate=final_evaluate,
    )
    trainer.fit()
    best_weights = load_safetensors(run.checkpoint("best") / "model.safetensors")
    avg = average_of_last(4)
    result = trainer.average_last(4)

    assert sorted(seen) == ["average", "best"]
    assert result["steps"] == [5, 10, 15, 20] and result["val_loss"] == 4.0  # greedy, recorded
    assert result["final"]["average"]["val_loss"] == (0.0 if final_prefers == "average" else 1.0)
    assert result["is_best"] == (final_prefers == "average")
    for k, p in model.state_dict().items():  # the model holds the average either way
        assert torch.allclose(p, avg[k])
    kept = load_safetensors(run.checkpoint("best") / "model.safetensors")
    if final_prefers == "average":
        assert run.pointer("best") == 21 and all(torch.allclose(kept[k], avg[k]) for k in avg)
    else:
        assert run.pointer("best") == 5 and all(torch.equal(kept[k], best_weights[k]) for k in kept)


def test_training_further_after_the_kept_average_continues_the_trained_state(tmp_path):
    """A finished run whose end-of-training average was kept (then both ``best`` and ``latest``)
    and that is resumed with a larger budget continues from its last trained checkpoint, exactly
    as one longer run; the average stays the best to beat, and the next average takes trained
    checkpoints only."""

    def trainer_for(run_dir, max_steps):
        torch.manual_seed(0)
        cfg = config_from_dict(
            {"train": {"eval_every": 5, "max_steps": max_steps, "log_every": 5, "keep_last": 6}}
        ).train
        calls = iter(range(100, 0, -1))  # val_loss falls with every call: the average wins
        return Trainer(
            torch.nn.Linear(3, 1),
            lambda m, x, state: LossOutput(m(x).pow(2).mean(), x.shape[0]),
            ToyData(),
            cfg,
            run_dir,
            evaluate=lambda m: {"val_loss": float(next(calls))},
            extra_meta={"arch": "linear"},  # what a model's checkpoint records (restore reads it)
        )

    trainer_for(tmp_path / "long", 30).fit()
    long_run, run = RunDir(tmp_path / "long"), RunDir(tmp_path / "cut")

    first = trainer_for(tmp_path / "cut", 20)
    first.fit()
    averaged = first.average_last(4)
    assert averaged["is_best"] and averaged["steps"] == [5, 10, 15, 20]
    assert run.pointer("latest") == run.pointer("best") == 21 and run.is_average(21)
    assert not run.is_average(20)
    assert run.resume_checkpoint() == run.step_dir(20)
    broken = RunDir(shutil.copytree(tmp_path / "cut", tmp_path / "broken"))
    shutil.rmtree(broken.step_dir(20))
    with pytest.raises(CheckpointError, match=r"average of steps \[5, 10, 15, 20\].*missing"):
        broken.resume_checkpoint()

    further = trainer_for(tmp_path / "cut", 30)
    further.restore(run.resume_checkpoint())
    assert further.state.step == 20 and further.state.best == averaged["val_loss"]
    further.fit()
    for name, weight in load_safetensors(run.step_dir(30) / "model.safetensors").items():
        expected = load_safetensors(long_run.step_dir(30) / "model.safetensors")[name]
        assert torch.equal(weight, expected)  # bit-identical to the run trained 30 steps at once
    again = further.average_last(4)
    assert again["steps"] == [15, 20, 25, 30]  # the kept average (21) is not averaged again


@pytest.mark.parametrize(
    ("limit", "reason", "lifted"),
    [
        ({"max_steps": 10}, "train.max_steps=10 reached", {"max_steps": 20}),
        ({"epochs": 1}, "train.epochs=1 done", {"epochs": 2}),
        ({"epochs": 1, "max_steps": 10}, "train.max_steps=10", {"max_steps": 20, "epochs": 2}),
    ],
)
def test_a_finished_run_names_the_limit_that_stopped_it_and_the_override_that_continues(
    tmp_path, limit, reason, lifted
):
    """Resuming a finished run is refused with the limit it reached (an epoch of ToyData is 10
    steps) and the overrides that lift every limit reached; following that advice trains on."""

    def trainer_for(train):
        torch.manual_seed(0)
        cfg = config_from_dict({"train": {"eval_every": 5, "log_every": 5, "epochs": 100, **train}})
        return Trainer(
            torch.nn.Linear(3, 1),
            lambda m, x, state: LossOutput(m(x).pow(2).mean(), x.shape[0]),
            ToyData(),
            cfg.train,
            tmp_path,
            evaluate=lambda m: {"val_loss": 1.0},
            extra_meta={"arch": "linear"},
        )

    trainer_for(limit).fit()
    with pytest.raises(SeqlabError, match="has finished") as exc:
        trainer_for(limit).restore(RunDir(tmp_path).resume_checkpoint())
    refused, advice = str(exc.value).split(f"seqlab train --resume {tmp_path} ")
    assert reason in refused
    overrides = dict(item.removeprefix("train.").split("=") for item in advice.split())
    assert {k: int(v) for k, v in overrides.items()} == lifted
    further = trainer_for(lifted)
    further.restore(RunDir(tmp_path).resume_checkpoint())
    further.fit()
    assert further.state.step == 20


def test_the_training_summary_says_which_way_best_goes_and_gives_the_last(tmp_path):
    """val_loss: the best is the lowest. The summary gives the direction and the last value
    beside the best, and each validation line names the best by its metric and direction."""
    stream = io.StringIO()
    stream.isatty = lambda: False  # plain lines
    cfg = config_from_dict(tiny_config(tmp_path, max_steps=10, eval_every=5))
    summary = train(cfg, tmp_path / "run", callbacks=[ProgressBar(stream)])
    evals = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["kind"] == "eval"]
    values = [r["val_loss"] for r in evals]
    assert summary["select"] == "val_loss" and summary["select_mode"] == "min"
    assert summary["best"] == min(values) and summary["last"] == values[-1]
    lines = [line for line in stream.getvalue().splitlines() if line.startswith("eval @")]
    assert len(lines) == 2 and all("best (lowest val_loss) " in line for line in lines)


def test_a_diverged_validation_perplexity_is_shown_as_beyond_1e6_not_its_40_digits():
    """The eval line shows val_ppl as the step line shows ppl: past 1e6 it says ">1e6"."""
    from seqlab.objective import Selection

    stream = io.StringIO()
    stream.isatty = lambda: False
    trainer = SimpleNamespace(select=Selection("val_loss", "min"))
    record = {"step": 500, "val_loss": 89.2749, "val_ppl": 5.9e38, "best": 89.2749}
    ProgressBar(stream).on_eval(trainer, record)
    line = stream.getvalue().strip()
    assert line == "eval @ step 500: val_loss 89.2749  val_ppl >1e6  best (lowest val_loss) 89.2749"
    stream.seek(0), stream.truncate()
    ProgressBar(stream).on_eval(trainer, {"step": 5, "val_loss": 1.7736, "val_ppl": 5.8922})
    assert stream.getvalue().strip() == "eval @ step 5: val_loss 1.7736  val_ppl 5.89"


def test_the_kept_average_takes_no_place_of_the_checkpoints_the_next_average_needs(tmp_path):
    """train.keep_last = train.average_last = 4: a run trained further after its average was
    kept (as the best) still has the last 4 trained checkpoints to average, not 3."""

    def trainer_for(max_steps, falling):
        torch.manual_seed(0)
        cfg = config_from_dict(
            {"train": {"eval_every": 5, "max_steps": max_steps, "keep_last": 4, "average_last": 4}}
        ).train
        calls = iter(range(100, 0, -1) if falling else range(200, 300))
        return Trainer(
            torch.nn.Linear(3, 1),
            lambda m, x, state: LossOutput(m(x).pow(2).mean(), x.shape[0]),
            ToyData(),
            cfg,
            tmp_path,
            evaluate=lambda m: {"val_loss": float(next(calls))},
            extra_meta={"arch": "linear"},
        )

    run = RunDir(tmp_path)
    first = trainer_for(20, falling=True)
    first.fit()
    assert first.average_last(4)["is_best"] and run.pointer("best") == 21  # the average
    further = trainer_for(30, falling=False)  # worse from here on: the average stays the best
    further.restore(run.resume_checkpoint())
    further.fit()
    assert run.steps() == [15, 20, 21, 25, 30] and run.pointer("best") == 21
    assert further.average_last(4)["steps"] == [15, 20, 25, 30]


@pytest.mark.parametrize(("keep_last", "max_steps"), [(2, 30), (1, 30), (2, 15)])
def test_average_last_averages_as_many_checkpoints_as_it_says_whatever_keep_last(
    tmp_path, keep_last, max_steps
):
    """train.average_last=4 with train.keep_last below it: pruning keeps the last 4 trained
    checkpoints, so the average takes 4; a run that saved only 3 averages those and says so."""
    cfg = config_from_dict(
        {
            "train": {
                "eval_every": 5,
                "max_steps": max_steps,
                "keep_last": keep_last,
                "average_last": 4,
            }
        }
    ).train
    calls = iter(range(100, 0, -1))
    trainer = Trainer(
        torch.nn.Linear(3, 1),
        lambda m, x, state: LossOutput(m(x).pow(2).mean(), x.shape[0]),
        ToyData(),
        cfg,
        tmp_path,
        evaluate=lambda m: {"val_loss": float(next(calls))},
    )
    trainer.fit()
    last = list(range(5, max_steps + 1, 5))[-4:]
    assert RunDir(tmp_path).steps() == last  # the best (the last) among them
    averaged = trainer.average_last(cfg.average_last)
    assert averaged["steps"] == last
    if len(last) == 4:
        assert "note" not in averaged
    else:
        assert averaged["note"] == "average of 3, not 4: only 3 trained checkpoints are there"


def test_too_many_threads_are_cut_to_the_cpus_with_a_warning():
    from seqlab.runtime.machine import cpu_count, set_threads

    before = torch.get_num_threads()
    try:
        with pytest.warns(UserWarning, match="more than the"):
            used = set_threads(100_000, "train.threads")
        assert used == cpu_count()
    finally:
        torch.set_num_threads(before)


def test_resume_refuses_what_it_cannot_honour_and_changes_nothing(runs, tmp_path, capsys):
    run = tmp_path / "lm"
    shutil.copytree(runs / "lm", run)
    before = snapshot(run)
    fails(
        capsys, ["train", "--resume", run, "model.hidden_size=64"], "model.hidden_size", "train.lr"
    )
    assert snapshot(run) == before
    assert main(["generate", "--run", str(run), "--tokens", "3"]) == 0


def test_resume_applies_a_new_learning_rate(runs, tmp_path):
    run = tmp_path / "lm"
    shutil.copytree(runs / "lm", run)
    train(None, run, resume=True, overrides=["train.max_steps=6", "train.lr=0.0001"])
    records = [r for r in read_metrics(run / "metrics.jsonl") if r["kind"] == "train"]
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5, 6]
    assert records[3]["lr"] == pytest.approx(1e-3) and records[5]["lr"] == pytest.approx(1e-4)
    assert load_config(run / "config.yaml").train.lr == pytest.approx(1e-4)


POISON = textwrap.dedent(
    """
    import sys, torch, yaml
    from seqlab.config import config_from_dict
    from seqlab.experiment import train
    from seqlab.training.trainer import Callback

    class Poison(Callback):  # the weights blow up after step 3
        def on_step(self, trainer, loss):
            if trainer.state.step == 3:
                with torch.no_grad():
                    next(trainer.model.parameters()).fill_(float("inf"))

    cfg = config_from_dict(yaml.safe_load(open(sys.argv[1])))
    train(cfg, sys.argv[2], callbacks=[Poison()])
    """
)


def test_divergence_keeps_the_last_good_checkpoint_and_its_advice_works(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT)
    cfg = write_config(tmp_path / "c.yaml", lm_raw(corpus, max_steps=8))
    (tmp_path / "poison.py").write_text(POISON)
    proc = subprocess.run(
        [sys.executable, str(tmp_path / "poison.py"), str(cfg), str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and "TrainingDiverged" in proc.stderr
    assert "at step 4" in proc.stderr and "step-00000002" in proc.stderr
    advice = "seqlab train --resume " + str(tmp_path / "run") + " train.lr=<lower>"
    assert advice in proc.stderr
    assert RunDir(tmp_path / "run").steps() == [2]
    for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines():
        json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} in metrics.jsonl"))
    assert main(["train", "--resume", str(tmp_path / "run"), "train.lr=0.0005"]) == 0
    assert RunDir(tmp_path / "run").pointer("latest") == 8


def test_the_advice_after_a_smaller_budget_names_values_that_work(runs, tmp_path, capsys):
    """A run at step 4 resumed with train.max_steps=2 is refused; the advice names a budget above
    the step reached (not twice the override, which would be refused again), and it trains."""
    run = tmp_path / "lm"
    shutil.copytree(runs / "lm", run)
    err = fails(
        capsys, ["train", "--resume", run, "train.max_steps=2"], "train.max_steps=2 reached"
    ).err
    advised = err.strip().split(f"seqlab train --resume {run} ")[1].split()
    assert advised == ["train.max_steps=6"]  # as much again as the limit, from step 4
    assert main(["train", "--resume", str(run), *advised]) == 0
    assert RunDir(run).pointer("latest") == 6


@pytest.mark.parametrize(
    "train",
    [
        {"max_steps": 10},
        {"max_steps": 20},
        {"epochs": 1},
        {"epochs": 2, "max_steps": 100},
        {"max_minutes": 5.0},
        {"early_stopping_patience": 2},
        {"max_steps": 10, "epochs": 1, "early_stopping_patience": 3, "max_minutes": 1.0},
    ],
)
def test_every_lifted_limit_lets_the_run_go_on(train):
    """Whatever budget a run at step 20 (epoch 2 of 10 steps, 5 validations without gain,
    10 minutes spent) is resumed with, the overrides named lift every limit reached."""
    state = TrainingState(step=20, epoch=2, evals_since_best=5)
    cfg = config_from_dict({"train": {"epochs": 100, **train}}).train
    budget, elapsed = Budget(cfg, steps_per_epoch=10), 600.0
    assert budget.reason(state, elapsed) or budget.out_of_patience(state, "val_loss")
    lifted = budget.lifted(state, elapsed)
    raised = {k.removeprefix("train."): int(v) for k, v in (x.split("=") for x in lifted)}
    cfg = config_from_dict({"train": {"epochs": 100, **train, **raised}}).train
    again = Budget(cfg, steps_per_epoch=10)
    assert again.reason(state, elapsed) == "" and again.out_of_patience(state, "val_loss") == ""


def test_resuming_a_finished_run_changes_nothing(runs, tmp_path, capsys):
    run = tmp_path / "lm"
    shutil.copytree(runs / "lm", run)
    before = snapshot(run)
    advice = f"seqlab train --resume {run} train.max_steps=8"  # the limit that ended it
    fails(capsys, ["train", "--resume", run], "has finished", "train.max_steps=4 reached", advice)
    assert snapshot(run) == before


def test_a_failing_plot_costs_no_training(tmp_path, monkeypatch, runs):
    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("seqlab.plotting.plot_curves", broken)
    with pytest.warns(UserWarning, match="could not draw .*curves.png: disk full"):
        summary = train(config_from_dict(lm_raw(runs / "corpus.txt")), tmp_path / "r")
    assert summary["step"] == 4 and RunDir(tmp_path / "r").steps()[-1] == 4


def test_resume_after_ctrl_c_is_exact(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT)
    raw = lm_raw(corpus, max_steps=8, eval_every=4)
    full = tmp_path / "full"
    train(config_from_dict(raw), full)
    script = textwrap.dedent(
        """
        import os, signal, sys, yaml
        from seqlab.cli import main
        from seqlab.training.trainer import Callback
        import seqlab.experiment as experiment

        class CtrlC(Callback):
            def on_step(self, trainer, loss):
                if trainer.state.step == 6:
                    os.kill(os.getpid(), signal.SIGINT)

        real = experiment.train
        experiment.train = lambda *a, **k: real(*a, callbacks=[CtrlC()], **k)
        sys.exit(main(["train", sys.argv[1], "--out", sys.argv[2]]))
        """
    )
    (tmp_path / "ctrlc.py").write_text(script)
    cfg = write_config(tmp_path / "c.yaml", raw)
    cut = tmp_path / "cut"
    proc = subprocess.run(
        [sys.executable, str(tmp_path / "ctrlc.py"), str(cfg), str(cut)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 130, proc.stderr
    assert "saved a checkpoint at step 6" in proc.stderr
    assert f"seqlab train --resume {cut}" in proc.stderr and "Traceback" not in proc.stderr
    train(None, cut, resume=True)

    def losses(run):
        return {
            r["step"]: r["loss"]
            for r in read_metrics(run / "metrics.jsonl")
            if r["kind"] == "train"
        }

    assert losses(cut) == losses(full)


class Blowup(Callback):
    """At ``step``, weights become huge but finite: the next validation gives NaN."""

    def __init__(self, step):
        self.step = step

    def on_step(self, trainer, loss):
        if trainer.state.step == self.step:
            with torch.no_grad():
                trainer.model.output.weight.fill_(3e38)


def test_a_nan_validation_is_never_the_best_nor_a_resumable_checkpoint(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT)
    run = tmp_path / "run"
    with pytest.raises(TrainingDiverged) as exc:
        train(config_from_dict(lm_raw(corpus, max_steps=6)), run, callbacks=[Blowup(4)])
    msg = str(exc.value)
    assert "validation val_loss = nan at step 4" in msg and "was not saved" in msg
    good = RunDir(run).step_dir(2)
    assert f"last good checkpoint: {good}" in msg
    assert RunDir(run).steps() == [2] and RunDir(run).pointer("best") == 2
    evals = [r for r in read_metrics(run / "metrics.jsonl") if r["kind"] == "eval"]
    assert [r["step"] for r in evals] == [2, 4] and evals[1]["val_loss"] is None
    # the advice works: resuming from the named checkpoint with a lower rate trains on
    assert main(["train", "--resume", str(run), "train.lr=0.0005"]) == 0
    assert RunDir(run).pointer("latest") == 6
    capsys.readouterr()


def test_a_nan_first_validation_leaves_no_checkpoint_and_says_so(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT)
    run = tmp_path / "run"
    with pytest.raises(TrainingDiverged, match="no checkpoint was written yet") as exc:
        train(config_from_dict(lm_raw(corpus)), run, callbacks=[Blowup(2)])
    assert "last good checkpoint" not in str(exc.value)
    assert RunDir(run).steps() == [] and RunDir(run).pointer("best") is None


class Poison(Callback):
    """At ``step``, the weights become infinite: the next training step's loss is not finite."""

    def __init__(self, step):
        self.step = step

    def on_step(self, trainer, loss):
        if trainer.state.step == self.step:
            with torch.no_grad():
                next(trainer.model.parameters()).fill_(math.inf)


def test_divergence_never_advises_resuming_from_a_bad_checkpoint(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT)
    run = tmp_path / "run"
    train(config_from_dict(lm_raw(corpus)), run)
    # a run from before this rule: its latest checkpoint was saved with a NaN validation
    meta_path = RunDir(run).step_dir(4) / "meta.json"
    meta = json.loads(meta_path.read_text())
    for record in meta["history"]:
        if record["step"] == 4:
            record["val_loss"] = math.nan
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(TrainingDiverged) as exc:
        train(None, run, resume=True, overrides=["train.max_steps=8"], callbacks=[Poison(5)])
    msg = str(exc.value)
    assert "loss became" in msg and "at step 6" in msg
    assert "no good checkpoint to resume from" in msg and "last good checkpoint" not in msg
    assert "--resume" not in msg


def test_a_run_with_a_time_budget_trains(tmp_path):
    """``train.max_minutes`` makes the schedule read the clock while the trainer is being built
    (the time fraction of a cosine schedule): it starts at zero and training goes on."""
    raw = tiny_config(tmp_path, max_steps=4, max_minutes=5.0, schedule="cosine")
    assert train(config_from_dict(raw), tmp_path / "run")["step"] == 4
