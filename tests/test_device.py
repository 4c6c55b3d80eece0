"""The device a run trains and a model computes on (``seqlab.runtime.device``): ``auto`` by default,
refused clearly when absent, recorded in the run, never read back when loading; the GPU's way of
stepping (numbers read once per log line, a fused optimizer skipping non-finite updates) run on
the CPU against the usual path."""

import json
import math

import pytest
import torch

import seqlab
from devices import DEVICES
from seqlab.cli import main
from seqlab.config import TrainConfig, config_from_dict
from seqlab.errors import ConfigError
from seqlab.experiment import train
from seqlab.runtime.device import describe_device, resolve_device
from seqlab.runtime.precision import Resolved
from seqlab.storage.checkpoints import load_safetensors
from seqlab.storage.rundir import RunDir
from seqlab.training.callbacks import MetricsLog, read_metrics
from seqlab.training.trainer import Callback, LossOutput, Trainer, TrainingDiverged
from tiny_runs import LM_TEXT, ToyData, lm_raw

NO_CUDA = not torch.cuda.is_available()


def test_auto_is_the_default_and_means_the_cpu_without_a_gpu(monkeypatch):
    assert TrainConfig().device == "auto"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device(None) == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")


@pytest.mark.skipif(not NO_CUDA, reason="checks the messages of a machine without CUDA")
@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("cuda", "train.device=cuda, but PyTorch sees no CUDA device; use cpu or auto"),
        ("cuda:1", "train.device=cuda:1, but PyTorch sees no CUDA device; use cpu or auto"),
        ("gpu", "train.device must be one of auto, cpu, cuda or cuda:N, got 'gpu'"),
        (0, "train.device=cuda:0, but PyTorch sees no CUDA device; use cpu or auto"),
        (
            1.5,
            "train.device must be one of auto, cpu, cuda, cuda:N or a GPU's number N, got 1.5 "
            "(float)",
        ),
        (
            True,
            "train.device must be one of auto, cpu, cuda, cuda:N or a GPU's number N, got True "
            "(bool)",
        ),
    ],
)
def test_a_device_that_is_not_here_is_refused_naming_the_setting(name, said):
    with pytest.raises(ConfigError) as exc:
        resolve_device(name, "train.device")
    assert str(exc.value) == said


def test_the_cpu_is_described_as_itself():
    assert describe_device("cpu") == {"device": "cpu"}


@pytest.fixture(scope="module")
def gpu_trained_run(tmp_path_factory):
    """A tiny LM run whose training recorded a GPU (the record faked: this machine has none)."""
    root = tmp_path_factory.mktemp("device")
    corpus = root / "corpus.txt"
    corpus.write_text(LM_TEXT)
    run_dir = root / "run"
    cfg = config_from_dict(lm_raw(corpus))
    fake = {"device": "cuda:0", "gpu": "NVIDIA H100 80GB HBM3", "capability": "9.0"}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("seqlab.experiment.describe_device", lambda device: fake)
        train(cfg, run_dir)
    return run_dir, fake


def test_a_run_records_its_training_device_and_loads_on_another(gpu_trained_run, capsys):
    run_dir, fake = gpu_trained_run
    assert json.loads((run_dir / "run.json").read_text())["device"] == fake
    step = RunDir(run_dir).pointer("best")
    weights = load_safetensors(RunDir(run_dir).step_dir(step) / "model.safetensors")
    assert {t.device.type for t in weights.values()} == {"cpu"}  # no device in the file
    model = seqlab.load(run_dir, device="cpu")
    assert model.device == torch.device("cpu")
    assert {p.device.type for p in model.model.parameters()} == {"cpu"}
    report = model.evaluate("val")
    assert report.to_json()["device"] == "cpu"
    assert main(["evaluate", "--run", str(run_dir), "--device", "cpu", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["device"] == "cpu"
    from seqlab.serve.app import load_models  # deferred: the server's packages

    assert load_models([str(run_dir)], device="cpu")["run"].device == torch.device("cpu")


@pytest.mark.skipif(not NO_CUDA, reason="checks the messages of a machine without CUDA")
def test_asking_for_a_gpu_that_is_not_here_says_so_in_every_caller(gpu_trained_run, capsys):
    run_dir, _ = gpu_trained_run
    said = "device=cuda, but PyTorch sees no CUDA device; use cpu or auto"
    with pytest.raises(ConfigError, match=said):
        seqlab.load(run_dir, device="cuda")
    with pytest.raises(ConfigError, match="device=cuda:0, but PyTorch sees no CUDA device"):
        seqlab.load(run_dir, device=0)  # PyTorch's own spelling of cuda:0
    assert main(["evaluate", "--run", str(run_dir), "--device", "cuda"]) != 0
    assert said in capsys.readouterr().err
    from seqlab.serve.app import load_models  # deferred: the server's packages

    with pytest.raises(ConfigError, match=said):
        load_models([str(run_dir)], device="cuda")


@pytest.mark.parametrize("device", DEVICES)
def test_a_model_moves_to_a_device_and_back_with_the_same_scores(gpu_trained_run, device):
    run_dir, _ = gpu_trained_run
    here = seqlab.load(run_dir, device="cpu").evaluate("val").scores
    there = seqlab.load(run_dir, device=device).evaluate("val").scores
    assert there["perplexity"] == pytest.approx(here["perplexity"], rel=1e-4)


# ------------------------------------------------------------ the GPU's way of stepping, on a CPU
def _fit(tmp_path, name, on_device, nan_at=None, log_every=3, callbacks=()):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    calls = {"n": 0, "before": None}

    def loss_fn(m, x, state):
        loss = m(x).pow(2).mean()
        calls["n"] += 1
        if calls["n"] == nan_at:
            calls["before"] = m.weight.detach().clone()
            loss = loss * float("nan")
        return LossOutput(loss, x.shape[0])

    cfg = config_from_dict(
        {"train": {"max_steps": 9, "log_every": log_every, "eval_every": 9, "grad_clip": 0.5}}
    ).train
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Trainer, "reads_on_device", on_device)
        trainer = Trainer(
            model,
            loss_fn,
            ToyData(),
            cfg,
            tmp_path / name,
            evaluate=lambda m: {"val_loss": 1.0},
            callbacks=[MetricsLog(tmp_path / name / "metrics.jsonl"), *callbacks],
        )
    assert trainer.deferred is on_device
    assert bool(trainer.optimizer.defaults.get("fused")) is on_device
    return trainer, model, calls


def test_reading_the_numbers_once_per_log_line_logs_what_each_step_read_logs(tmp_path):
    logged = {}
    for on_device in (False, True):
        trainer, model, _ = _fit(tmp_path, f"d{on_device}", on_device)
        trainer.fit()
        path = tmp_path / f"d{on_device}" / "metrics.jsonl"
        records = [r for r in read_metrics(path) if r["kind"] == "train"]
        logged[on_device] = (records, model.weight.detach().clone())
    (usual, w_usual), (deferred, w_deferred) = logged[False], logged[True]
    assert [r["step"] for r in usual] == [r["step"] for r in deferred] == [1, 3, 6, 9]
    for a, b in zip(usual, deferred, strict=True):
        for key in ("loss", "grad_norm", "clipped"):
            assert b[key] == pytest.approx(a[key], rel=1e-5), key
        assert isinstance(b["loss"], float) and isinstance(b["clipped"], float)
    torch.testing.assert_close(w_deferred, w_usual)  # the fused optimizer takes the same steps


def test_a_non_finite_step_read_later_changed_no_weight_and_names_its_steps(tmp_path):
    after = {}  # the weights after each step

    class Weights(Callback):
        def on_step(self, trainer, loss):
            after[trainer.state.step] = trainer.model.weight.detach().clone()

    trainer, model, calls = _fit(tmp_path, "nan", True, nan_at=5, callbacks=[Weights()])
    with pytest.raises(TrainingDiverged) as exc:
        trainer.fit()
    msg = str(exc.value)
    assert "the loss became non-finite in steps 4-6" in msg
    assert "the steps with a non-finite loss or gradient did not update the weights" in msg
    assert sorted(after) == [1, 2, 3, 4, 5, 6]  # stopped at the log line after step 6
    assert torch.equal(after[5], after[4])  # step 5 skipped on the device
    assert not torch.equal(after[6], after[5])  # step 6 trained as usual
    assert torch.isfinite(model.weight).all()


def test_train_compile_takes_the_same_steps_and_saves_the_same_names(tmp_path):
    weights = {}
    for compiled in (False, True):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
        cfg = config_from_dict(
            {"train": {"max_steps": 4, "eval_every": 4, "log_every": 1, "compile": compiled}}
        ).train
        Trainer(
            model,
            lambda m, x, state: LossOutput(m(x).pow(2).mean(), x.shape[0]),
            ToyData(),
            cfg,
            tmp_path / str(compiled),
            evaluate=lambda m: {"val_loss": 1.0},
        ).fit()
        step = RunDir(tmp_path / str(compiled)).pointer("best")
        path = RunDir(tmp_path / str(compiled)).step_dir(step) / "model.safetensors"
        weights[compiled] = load_safetensors(path)
    assert (
        sorted(weights[True])
        == sorted(weights[False])
        == ["0.bias", "0.weight", "2.bias", "2.weight"]
    )
    for name, value in weights[False].items():
        torch.testing.assert_close(weights[True][name], value, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("on_device", [False, True])
def test_fp16_overflowed_steps_are_skipped_by_the_scaler_not_called_a_divergence(
    tmp_path, on_device
):
    """fp16 (``auto`` on a GPU without bf16) scales the loss: the first steps overflow by design
    (the scale starts at 2**16) and are skipped while the scale comes down."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
    cfg = config_from_dict({"train": {"max_steps": 12, "eval_every": 12, "log_every": 4}}).train
    fp16 = Resolved("fp16", "test: fp16 on the CPU")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Trainer, "reads_on_device", on_device)
        trainer = Trainer(
            model,
            lambda m, x, state: LossOutput(m(x * 3000.0).pow(2).mean(), x.shape[0]),
            ToyData(),
            cfg,
            tmp_path,
            evaluate=lambda m: {"val_loss": 1.0},
            callbacks=[MetricsLog(tmp_path / "metrics.jsonl")],
            precision=fp16,
        )
    assert trainer.scaler is not None
    trainer.fit()
    assert trainer.scaler.get_scale() < 2.0**16  # it overflowed, and came down
    records = [r for r in read_metrics(tmp_path / "metrics.jsonl") if r["kind"] == "train"]
    assert records and all(math.isfinite(r["grad_norm"]) for r in records)
    assert torch.isfinite(torch.cat([p.flatten() for p in model.parameters()])).all()
