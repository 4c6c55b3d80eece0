"""Two nodes simulated on one machine: two torchrun agents (``--nnodes 2``, one process each)
meet at a rendezvous on 127.0.0.1, train, checkpoint, are killed, and resume — with the losses of
one process accumulating two minibatches per step."""

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from conftest import tiny_dates_transformer
from seqlab.config import config_from_dict
from seqlab.experiment import train
from seqlab.storage.checkpoints import read_meta
from seqlab.storage.rundir import RunDir
from seqlab.training.callbacks import read_metrics

#: the full tier (24 s): two processes over gloo stay in the default tier (tests/test_trainer.py)
pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="gloo over loopback"),
    pytest.mark.slow,
]

KILL_AFTER_CHECKPOINT = textwrap.dedent(
    """
    import os, signal, sys
    from seqlab.cli import main
    from seqlab.training.trainer import Trainer

    save = Trainer.save_checkpoint

    def save_then_die(self, *args, **kwargs):  # every node dies once step N is saved
        save(self, *args, **kwargs)
        if self.state.step == int(os.environ["KILL_AT_STEP"]):
            os.kill(os.getpid(), signal.SIGKILL)

    Trainer.save_checkpoint = save_then_die
    sys.exit(main(sys.argv[1:]))
    """
)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def two_nodes(script_and_args, cwd, env):
    """Start the two agents (node ranks 0 and 1) and wait for both; their exit codes."""
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    port = str(free_port())
    agents = [
        subprocess.Popen(
            [torchrun, "--nnodes", "2", "--node-rank", str(rank), "--nproc-per-node", "1"]
            + ["--master-addr", "127.0.0.1", "--master-port", port, *script_and_args],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in (0, 1)
    ]
    outputs = [a.communicate(timeout=240)[0] for a in agents]
    return [a.returncode for a in agents], outputs


def losses(run_dir):
    return {
        r["step"]: r["loss"]
        for r in read_metrics(run_dir / "metrics.jsonl")
        if r["kind"] == "train"
    }


def test_two_nodes_train_are_killed_and_resume_like_one_process(tmp_path):
    raw = tiny_dates_transformer(
        data={"batch_tokens": 300},
        train={"max_steps": 8, "log_every": 1, "lr": 3e-3, "keep_last": 2, "precision": "fp32"},
    )
    single = {**raw, "train": {**raw["train"], "accumulate": 2}}
    train(config_from_dict(single), tmp_path / "one")
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(raw))
    (tmp_path / "kill.py").write_text(KILL_AFTER_CHECKPOINT)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "KILL_AT_STEP": "4"}
    run = str(tmp_path / "two")

    codes, outputs = two_nodes(["kill.py", "train", "cfg.yaml", "--out", run], tmp_path, env)
    assert all(code != 0 for code in codes), outputs  # both nodes were killed...
    assert RunDir(tmp_path / "two").pointer("latest") == 4, outputs  # ...after step 4 was saved
    assert read_meta(RunDir(tmp_path / "two").checkpoint("latest"))["world_size"] == 2

    codes, outputs = two_nodes(["-m", "seqlab", "train", "--resume", run], tmp_path, env)
    assert codes == [0, 0], outputs[0][-3000:]
    one, two = losses(tmp_path / "one"), losses(tmp_path / "two")
    assert sorted(one) == sorted(two) == list(range(1, 9))
    for step in one:
        assert two[step] == pytest.approx(one[step], rel=1e-4, abs=1e-5)
    assert RunDir(tmp_path / "two").pointer("best") == RunDir(tmp_path / "one").pointer("best")
