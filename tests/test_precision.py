"""Precision: one decision per machine (no timing), recorded in the run, kept on resume; fp32
inference unless bf16 is asked for."""

import json
import os
import subprocess
import sys
import time
import warnings

import pytest
import torch
import yaml

from seqlab import load
from seqlab.config import config_from_dict, load_config
from seqlab.errors import ConfigError
from seqlab.experiment import train
from seqlab.runtime import precision as P
from seqlab.storage.checkpoints import read_meta
from seqlab.storage.rundir import RunDir

TEXT = "the time traveller for so it will be convenient to speak of him was expounding " * 30


def tiny(tmp_path, **train_keys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT)
    return {
        "data": {"dataset": "text", "path": str(corpus), "batch_size": 4, "num_steps": 8},
        "model": {"arch": "rnn_lm", "cell": "gru", "embed_dim": 8, "hidden_size": 8},
        "train": {"max_steps": 4, "eval_every": 2, "log_every": 2, "threads": 1, **train_keys},
    }


def recorded(run):
    info = json.loads((run / "run.json").read_text())
    return info["precision"]["train"], read_meta(RunDir(run).checkpoint("latest"))["precision"]


@pytest.fixture
def detect(monkeypatch):
    """Real detection, with the CPU flags set by the test."""
    monkeypatch.delenv(P.NATIVE_BF16_ENV, raising=False)

    def set_flags(native, amx=False, vendor="AuthenticAMD"):
        flags = {"avx512_bf16": native, "amx": amx}
        monkeypatch.setattr(P, "cpu_bf16_flags", lambda: flags)
        monkeypatch.setattr(P, "cpu_vendor", lambda: vendor)

    return set_flags


def test_auto_follows_the_cpu_flags_and_never_times_anything(detect, monkeypatch):
    def no_clock():
        raise AssertionError("the precision decision must not depend on a timing")

    monkeypatch.setattr(time, "perf_counter", no_clock)
    detect(True)
    assert P.resolve_precision("auto").precision == "bf16"
    assert "avx512_bf16" in P.resolve_precision("auto").reason
    detect(False)
    resolved = P.resolve_precision("auto")
    assert resolved.precision == "fp32" and resolved.dtype is None
    assert "no AVX512_BF16/AMX" in resolved.reason
    with pytest.warns(UserWarning, match="emulated here and run many times slower"):
        assert P.resolve_precision("bf16").precision == "bf16"
    assert P.resolve_precision("fp32") == P.FP32


def test_auto_trains_in_fp32_on_intel_bf16_without_amx_where_bf16_is_slower(detect, monkeypatch):
    """Native bf16 is not always the faster: on an Intel CPU with AVX512_BF16 and no AMX, auto
    trains in fp32 (and says why); AMX, AMD's AVX512_BF16, an explicit bf16 and the environment
    override keep bf16."""
    detect(True, vendor="GenuineIntel")
    resolved = P.resolve_precision("auto")
    assert resolved.precision == "fp32"
    assert resolved.reason == (
        "auto: Intel CPU with AVX512_BF16 but no AMX, where bf16 trains slower than fp32"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # native: an explicit bf16 runs without a warning
        assert P.resolve_precision("bf16") == P.Resolved("bf16", "requested bf16")
    detect(True, amx=True, vendor="GenuineIntel")
    assert P.resolve_precision("auto").precision == "bf16"
    detect(True, vendor="AuthenticAMD")
    assert P.resolve_precision("auto").precision == "bf16"
    detect(True, vendor="GenuineIntel")
    monkeypatch.setenv(P.NATIVE_BF16_ENV, "1")
    assert P.resolve_precision("auto").precision == "bf16"
    # a run that auto put in bf16 elsewhere keeps it here: the CPU runs bf16 natively
    monkeypatch.delenv(P.NATIVE_BF16_ENV)
    assert P.resume_precision("bf16", "auto", False).precision == "bf16"


def test_the_environment_overrides_detection(monkeypatch):
    monkeypatch.setenv(P.NATIVE_BF16_ENV, "1")
    assert P.resolve_precision("auto").precision == "bf16"
    monkeypatch.setenv(P.NATIVE_BF16_ENV, "0")
    assert P.resolve_precision("auto").precision == "fp32"
    monkeypatch.setenv(P.NATIVE_BF16_ENV, "yes")
    with pytest.raises(ConfigError, match="SEQLAB_NATIVE_BF16 must be 0 or 1, got 'yes'"):
        P.resolve_precision("auto")


def test_auto_decides_the_same_in_two_processes(monkeypatch):
    env = {k: v for k, v in os.environ.items() if k != P.NATIVE_BF16_ENV}
    code = "from seqlab.runtime.precision import resolve_precision as r; print(r('auto'))"
    runs = [
        subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    ]
    monkeypatch.delenv(P.NATIVE_BF16_ENV)
    assert runs[0] == runs[1] == f"{P.resolve_precision('auto')}\n"


def test_inference_precision_is_fp32_by_default_and_auto_means_fp32(tmp_path):
    raw = tiny(tmp_path)
    assert config_from_dict(raw).decode.precision == "fp32"
    raw["decode"] = {"precision": "auto"}  # as older runs' configs say
    assert config_from_dict(raw).decode.precision == "fp32"
    raw["decode"] = {"precision": "fp16"}
    with pytest.raises(ConfigError, match="decode.precision"):
        config_from_dict(raw)


def test_resume_rules():
    assert P.resume_precision("fp32", "auto", False).reason.startswith("recorded")
    assert P.resume_precision(None, "fp32", False) == P.FP32  # runs from before the record
    assert P.resume_precision("bf16", "fp32", True) == P.FP32  # explicit on resume: honoured
    with pytest.warns(UserWarning, match="emulated"):  # the run's own explicit bf16: honoured
        assert P.resume_precision("bf16", "bf16", False).precision == "bf16"
    with pytest.raises(ConfigError, match="this run trained in bf16"):
        P.resume_precision("bf16", "auto", False)  # conftest: no native bf16


def test_a_run_records_its_precision_and_resume_keeps_it(tmp_path, monkeypatch):
    """auto resolved to bf16 on a bf16 machine: resumed there, it stays bf16; on a machine
    without bf16 it refuses and names both choices; an explicit choice is honoured."""
    monkeypatch.setenv(P.NATIVE_BF16_ENV, "1")
    run = tmp_path / "run"
    train(config_from_dict(tiny(tmp_path)), run)
    assert recorded(run) == ("bf16", "bf16")
    info = json.loads((run / "run.json").read_text())
    assert info["precision"]["eval"] == "fp32" and info["machine"]["precision"] == "bf16"
    assert load(run).precision.precision == "fp32"  # inference is fp32 whatever training was

    train(None, run, resume=True, overrides=["train.max_steps=6"])
    assert recorded(run) == ("bf16", "bf16")

    monkeypatch.setenv(P.NATIVE_BF16_ENV, "0")  # the same run on an AVX2-only machine
    with pytest.raises(ConfigError) as err:
        train(None, run, resume=True, overrides=["train.max_steps=8"])
    message = str(err.value)
    assert f"--resume {run}: this run trained in bf16" in message
    assert "train.precision=bf16" in message and "train.precision=fp32" in message
    assert RunDir(run).pointer("latest") == 6  # nothing was trained or written

    train(None, run, resume=True, overrides=["train.max_steps=8", "train.precision=fp32"])
    assert recorded(run) == ("fp32", "fp32")
    assert load_config(run / "config.yaml").train.precision == "fp32"


def test_an_fp32_run_stays_fp32_on_a_bf16_machine(tmp_path, monkeypatch):
    monkeypatch.setenv(P.NATIVE_BF16_ENV, "0")
    run = tmp_path / "run"
    train(config_from_dict(tiny(tmp_path)), run)
    assert recorded(run) == ("fp32", "fp32")
    monkeypatch.setenv(P.NATIVE_BF16_ENV, "1")
    train(None, run, resume=True, overrides=["train.max_steps=6"])
    assert recorded(run) == ("fp32", "fp32")
    assert yaml.safe_load((run / "config.yaml").read_text())["train"]["precision"] == "auto"


def test_bf16_autocast_reaches_the_matrix_products():
    layer = torch.nn.Linear(4, 4)
    with P.autocast(P.Resolved("bf16", "test")):
        assert layer(torch.randn(2, 4)).dtype == torch.bfloat16
    with P.autocast(P.FP32):
        assert layer(torch.randn(2, 4)).dtype == torch.float32
