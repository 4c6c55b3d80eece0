"""The training state (seqlab.storage.training_state): one schema from the trainer to meta.json
and back. A new resumable field is one field of the schema; old checkpoints load as they are."""

import json

import pytest
import torch

from seqlab.config import config_from_dict
from seqlab.errors import CheckpointError
from seqlab.objective import LossOutput
from seqlab.storage import training_state
from seqlab.storage.checkpoints import FORMAT
from seqlab.storage.rundir import RunDir
from seqlab.storage.training_state import FILE_KEYS, TrainingState
from seqlab.training.trainer import Callback, Trainer
from tiny_runs import ToyData


class Counted(TrainingState):
    """The schema with one more field: the only edit a new resumable field needs."""

    rows_seen: int = 0


class CountingTrainer(Trainer):
    State = Counted


class CountRows(Callback):
    """Changes the new field as training goes (8 rows a step), as a trainer's code would."""

    def on_step(self, trainer, loss):
        trainer.state.rows_seen += 8


def trainer_for(run_dir, max_steps, cls=CountingTrainer):
    torch.manual_seed(0)
    cfg = config_from_dict({"train": {"max_steps": max_steps, "eval_every": 3, "log_every": 3}})
    return cls(
        torch.nn.Linear(3, 1),
        lambda m, x, state: LossOutput(m(x).pow(2).mean(), x.shape[0]),
        ToyData(),
        cfg.train,
        run_dir,
        evaluate=lambda m: {"val_loss": 1.0},
        callbacks=[CountRows()] if cls is CountingTrainer else [],
        extra_meta={"arch": "linear", "vocab_size": 7},
    )


def test_a_new_field_of_the_schema_is_saved_and_resumed_with_no_other_edit(tmp_path):
    trainer_for(tmp_path, 3).fit()
    latest = RunDir(tmp_path).checkpoint("latest")
    assert json.loads((latest / "meta.json").read_text())["rows_seen"] == 24  # on disk as is

    resumed = trainer_for(tmp_path, 6)
    resumed.restore(RunDir(tmp_path).resume_checkpoint())
    assert isinstance(resumed.state, Counted) and resumed.state.rows_seen == 24
    resumed.fit()
    assert resumed.state.step == 6 and resumed.state.rows_seen == 48
    again = training_state.read(RunDir(tmp_path).checkpoint("latest"), Counted)
    assert again.rows_seen == 48 and again.facts == {"arch": "linear", "vocab_size": 7}


def test_meta_json_is_the_state_as_the_trainer_holds_it(tmp_path):
    """Memory and disk have one shape: meta.json is the state's dump and the file keys, and it
    reads back equal to the trainer's state."""
    trainer = trainer_for(tmp_path, 4, cls=Trainer)
    trainer.fit()
    meta = json.loads((RunDir(tmp_path).checkpoint("latest") / "meta.json").read_text())
    assert {k: v for k, v in meta.items() if k not in FILE_KEYS} == trainer.state.model_dump()
    assert training_state.read(RunDir(tmp_path).checkpoint("latest")) == trainer.state
    assert trainer.state.schedule.steps == 4
    # a checkpoint saved before a field was added reads with the field's default
    assert training_state.read(RunDir(tmp_path).checkpoint("latest"), Counted).rows_seen == 0
    assert [record["step"] for record in trainer.state.history] == [3, 4]


#: a meta.json as seqlab wrote it before the schema (an audio run's), tensor skeletons cut short
OLD_META = {
    "format": FORMAT,
    "step": 30,
    "epoch": 10,
    "batch": 0,
    "best": 1.0,
    "evals_since_best": 0,
    "history": [{"step": 30, "epoch": 10, "val_loss": 1.0, "best": 1.0, "elapsed_s": 0.45}],
    "world_size": 1,
    "accumulate": 1,
    "elapsed_s": 0.4474764909999749,
    "finished": "step budget train.max_steps=30 reached",
    "precision": "fp32",
    "optimizer": {"state": {"__dict__": []}},
    "rank_state": {"__dict__": []},
    "schedule": {"steps": 30, "scale": 1.0},
    "plateau": None,
    "arch": "audio_classifier",
    "num_classes": 2,
    "sha256": {"model.safetensors": "df51"},
}


def test_a_checkpoint_written_before_the_schema_reads_as_it_is(tmp_path):
    (tmp_path / "meta.json").write_text(json.dumps(OLD_META))
    state = training_state.read(tmp_path)
    assert (state.step, state.epoch, state.best, state.precision) == (30, 10, 1.0, "fp32")
    assert state.schedule.steps == 30 and state.averaged_steps is None
    assert state.facts == {"arch": "audio_classifier", "num_classes": 2}  # file keys left out


@pytest.mark.parametrize(
    ("key", "value", "named"),
    [("step", "twelve", "step"), ("schedule", {"steps": -1, "scale": 1.0}, "schedule.steps")],
)
def test_a_damaged_state_is_refused_naming_the_key(tmp_path, key, value, named):
    (tmp_path / "meta.json").write_text(json.dumps({**OLD_META, key: value}))
    with pytest.raises(CheckpointError, match=f"damaged checkpoint metadata: {named}:"):
        training_state.read(tmp_path)
