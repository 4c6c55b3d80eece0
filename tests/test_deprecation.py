"""Renamed option values and keyword arguments: the old names keep working, with one warning."""

import warnings
from pathlib import Path

import pytest
import yaml

import seqlab
from conftest import run_offline
from seqlab import deprecation
from seqlab.config import config_from_dict, save_config
from seqlab.deprecation import RENAMED_VALUES, SeqlabDeprecationWarning, renamed_kwargs
from seqlab.models import build_model
from seqlab.models.bahdanau import Bahdanau, BahdanauD2L


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch):
    """Each test sees the first use of an old name (the warning is once per process)."""
    monkeypatch.setattr(deprecation, "_warned", set())


def _lm(cell):
    return {
        "data": {"dataset": "timemachine"},
        "model": {"arch": "rnn_lm", "cell": cell, "backend": "scratch"},
    }


def _bahdanau(decoder):
    return {"data": {"dataset": "fra-eng"}, "model": {"arch": "bahdanau", "decoder": decoder}}


@pytest.mark.parametrize(
    ("raw", "key", "old", "new"),
    [
        (_lm("gru_notes"), "cell", "gru_notes", "gru_reset_before"),
        (_lm("gated_rnn"), "cell", "gated_rnn", "output_gated_rnn"),
        (_bahdanau("paper"), "decoder", "paper", "maxout"),
        (_bahdanau("d2l"), "decoder", "d2l", "linear"),
    ],
)
def test_an_old_value_loads_as_the_new_one_with_one_warning(raw, key, old, new):
    with pytest.warns(SeqlabDeprecationWarning) as record:
        cfg = config_from_dict(raw)
    assert getattr(cfg.model, key) == new
    messages = [str(w.message) for w in record if w.category is SeqlabDeprecationWarning]
    assert messages == [f"model.{key}={old} is deprecated; use model.{key}={new}"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second use in the same process is silent
        assert getattr(config_from_dict(raw).model, key) == new


def test_the_old_decoder_names_build_the_models_they_always_built():
    with pytest.warns(SeqlabDeprecationWarning):
        paper = config_from_dict(_bahdanau("paper")).model
        d2l = config_from_dict(_bahdanau("d2l")).model
    assert type(build_model(paper, src_vocab_size=7, tgt_vocab_size=7)) is Bahdanau
    assert type(build_model(d2l, src_vocab_size=7, tgt_vocab_size=7)) is BahdanauD2L


def test_a_run_config_written_with_an_old_name_is_saved_with_the_new_one(tmp_path):
    with pytest.warns(SeqlabDeprecationWarning):
        cfg = config_from_dict(_lm("gru_notes"))
    save_config(cfg, tmp_path / "config.yaml")
    saved = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert saved["model"]["cell"] == "gru_reset_before"


def test_new_names_load_silently_and_unknown_ones_still_fail():
    from seqlab.errors import ConfigError

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for new in RENAMED_VALUES["model.cell"].values():
            assert config_from_dict(_lm(new)).model.cell == new
        for new in RENAMED_VALUES["model.decoder"].values():
            assert config_from_dict(_bahdanau(new)).model.decoder == new
    with pytest.raises(ConfigError, match="gru_reset_before"):
        config_from_dict(_lm("gru_typo"))


def test_the_command_line_prints_the_deprecation_once(tmp_path):
    """Through an override, as a user's old command line would say it; the run then stops at the
    missing data, after the config was read."""
    empty = tmp_path / "empty"
    empty.mkdir()
    out = run_offline(
        [
            "train",
            "configs/timemachine-char-rnn.yaml",
            "model.cell=gru_notes",
            "model.backend=scratch",
            "--out",
            str(tmp_path / "run"),
        ],
        empty,
    )
    lines = out.stderr.splitlines()
    expected = (
        "seqlab: warning: model.cell=gru_notes is deprecated; use model.cell=gru_reset_before"
    )
    assert lines.count(expected) == 1, out.stderr
    assert out.returncode == 2 and "seqlab: error:" in out.stderr


def test_renamed_kwargs_accepts_the_old_keyword_with_a_deprecation_warning():
    @renamed_kwargs(need_attention="need_weights")
    def f(x, *, need_weights=False):
        return x, need_weights

    assert f(1, need_weights=True) == (1, True)
    with pytest.warns(DeprecationWarning, match=r"f\(need_attention=...\) is deprecated"):
        assert f(1, need_attention=True) == (1, True)
    with pytest.raises(TypeError, match="both need_attention"):
        f(1, need_attention=True, need_weights=True)


def test_the_inner_code_has_no_renamed_keywords():
    """The building blocks, the model's decoding steps and the searches take their keywords as
    written: old spellings were read at the edges only (issue 62), so no wrapper runs per call."""
    root = Path(seqlab.__file__).parent
    inner = [*sorted((root / "nn").glob("*.py")), root / "models" / "search.py"]
    inner.append(root / "models" / "encoder_decoder.py")
    assert [p.name for p in inner if "renamed_kwargs" in p.read_text(encoding="utf-8")] == []


def test_old_keyword_spellings_removed_from_the_inner_code_fail_by_name():
    """need_attention / return_attention -> need_weights; valid_lens / src_len -> lengths: renamed
    on 2026-11-23, removed from nn/ and the searches on 2026-12-02 (the changelog's table); a call
    with one is Python's TypeError naming it, never a silent default."""
    import torch

    from conftest import make_encoder_decoder, random_translation_batch
    from seqlab.models.search import beam_search, greedy_search
    from seqlab.nn.attention import masked_softmax
    from seqlab.nn.transformer import Encoder

    scores, lens = torch.randn(2, 3, 5), torch.tensor([2, 5])
    with pytest.raises(TypeError, match="valid_lens"):
        masked_softmax(scores, valid_lens=lens)
    enc = Encoder(9, d_model=8, num_heads=2, num_layers=1, d_ff=16).eval()
    with pytest.raises(TypeError, match="return_attention"):
        enc(torch.randint(4, 9, (2, 5)), lengths=lens, return_attention=True)
    model = make_encoder_decoder("bahdanau-1").eval()
    batch = random_translation_batch()
    memory = model.encode(batch.src, batch.src_lengths)
    with pytest.raises(TypeError, match="need_attention"):
        model.decode(memory, batch.tgt_in, need_attention=True)
    for search in (greedy_search, beam_search):
        with pytest.raises(TypeError, match="src_len"):
            search(model, batch.src, src_len=batch.src_lengths)


@pytest.mark.parametrize(
    ("argv", "old", "attr", "value"),
    [
        (["translate", "--checkpoint", "R"], "--checkpoint", "run", "R"),
        (
            ["export", "--format", "ctranslate2", "--out", "D", "--checkpoint=R"],
            "--checkpoint",
            "run",
            "R",
        ),
        (["forecast", "--run", "R", "--steps", "7"], "--steps", "horizon", 7),
        (["evaluate", "--run", "R", "--plot", "f.png"], "--plot", "png", "f.png"),
        (["evaluate", "--run", "R", "--confusion-png", "c.png"], "--confusion-png", "png", "c.png"),
        (["data", "stats", "timemachine", "--plot", "z.png"], "--plot", "png", "z.png"),
        (["curves", "A", "--out", "c.png"], "--out", "png", "c.png"),
    ],
)
def test_an_old_flag_parses_as_the_new_one_with_one_warning(argv, old, attr, value):
    """Through :data:`~seqlab.deprecation.RENAMED_FLAGS`: a required new flag (``--run``) is
    satisfied by its old name too."""
    from seqlab.cli import build_parser

    with pytest.warns(SeqlabDeprecationWarning) as record:
        args = build_parser().parse_args(argv)
    assert getattr(args, attr) == value
    messages = [str(w.message) for w in record if w.category is SeqlabDeprecationWarning]
    assert messages == [f"seqlab {' '.join(argv[:2 if argv[0] == 'data' else 1])} {old} is "
                        f"deprecated; use --{attr}"]  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second use in the same process is silent
        assert getattr(build_parser().parse_args(argv), attr) == value


@pytest.mark.parametrize(
    "command",
    [["translate"], ["evaluate"], ["forecast"], ["export"], ["data", "stats"], ["curves"]],
)
def test_old_flags_are_hidden_from_help(command, capsys):
    from seqlab.cli import main

    with pytest.raises(SystemExit):
        main([*command, "--help"])
    text = capsys.readouterr().out
    renames = deprecation.RENAMED_FLAGS[" ".join(command)]
    assert not [old for old in renames if f"{old} " in text or f"{old}\n" in text]
    assert all(new in text for new in renames.values())


#: what each command with renamed flags needs besides them (``--run R`` is added unless renamed)
_BASE = {
    "export": ["--format", "ctranslate2", "--out", "D"],
    "data stats": ["timemachine"],
    "curves": ["A"],
}


def _together():
    """Every old flag of RENAMED_FLAGS given with its new name, both orders, ``=`` forms and an
    abbreviation among them; and the issue's cases (two old names of one flag)."""
    cases = []
    for command, flags in deprecation.RENAMED_FLAGS.items():
        base = [*command.split(), *_BASE.get(command, [])]
        for old, new in flags.items():
            run = [] if new == "--run" or command not in COMMANDS else ["--run", "R"]
            value = "3" if new == "--horizon" else "x.png"
            cases.append(([*base, *run, new, value, old, value], [old], new))
            cases.append(([*base, *run, f"{old}={value}", f"{new}={value}"], [old], new))
    cases += [
        (["forecast", "--run", "R", "--horizon", "4", "--steps", "3"], ["--steps"], "--horizon"),
        (["forecast", "--run", "R", "--steps", "3", "--hor", "4"], ["--steps"], "--horizon"),
        (["evaluate", "--checkpoint", "A", "--run", "B"], ["--checkpoint"], "--run"),
        (["evaluate", "--run", "R", "--confusion-png", "a", "--png", "b"], ["--confusion-png"], "--png"),
        (["evaluate", "--run", "R", "--plot", "a", "--confusion-png", "b"], ["--plot", "--confusion-png"], "--png"),
    ]  # fmt: skip
    return cases


#: the commands of trained runs (they take --run)
COMMANDS = ("evaluate", "translate", "classify", "forecast", "generate", "export")


@pytest.mark.parametrize(("argv", "names", "new"), _together())
def test_an_old_flag_and_its_new_name_together_are_an_error_naming_both(argv, names, new, capsys):
    """argparse would keep one value and drop the other; as an old key and its new one in a
    config file, it is refused, naming both, before any deprecation warning."""
    from seqlab.cli import main

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(SystemExit) as stop:
            main(argv)
    assert stop.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "given together" in last and f"give only {new}" in last, last
    assert all(name in last for name in names), last
