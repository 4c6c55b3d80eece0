"""CTranslate2 export: the engine computes seqlab's probabilities and decodes the same outputs."""

import builtins
import copy
import functools
import importlib.util
import json
import math
import os
import shutil
import threading
import time

import pytest
import torch

from cli_checks import fails, snapshot, succeeds, users_folder
from devices import DEVICES
from precision_helpers import PRECISIONS, SCORE_TOL, assert_same_outputs, computing_in
from seqlab import load
from seqlab.cli import main
from seqlab.config import config_from_dict
from seqlab.data.translation_batching import pad_sequences
from seqlab.errors import SeqlabError
from seqlab.experiment import train
from seqlab.models.search import beam_search, greedy_search
from seqlab.tasks.translation import load_pairs
from seqlab.tokens import BOS, EOS

ctranslate2 = pytest.importorskip("ctranslate2")
from seqlab.export.ctranslate2 import export_ctranslate2  # noqa: E402
from seqlab.export.ctranslate2_engine import CTranslate2Engine  # noqa: E402

#: the ``runs`` fixture's translation model: a Transformer, as an export needs
RUNS_MT = "transformer-dates-2"

LIMITS = {"max_len_a": 0.0, "max_len_b": 12}


def dates_transformer(root, norm, share):
    data = {"dataset": "dates", "num_examples": 1500, "val_examples": 40, "max_len": 40}
    data.update(
        {"tokenizer": "subword", "subword": {"vocab_size": 60, "joint": True}}
        if share
        else {"tokenizer": "char", "batch_tokens": 1024}
    )
    raw = {
        "data": data,
        "model": {
            "arch": "transformer",
            "d_model": 32,
            "num_heads": 4,
            "encoder_layers": 2,
            "decoder_layers": 2,
            "d_ff": 64,
            "dropout": 0.0,
            "max_len": 64,
            "norm": norm,
            "share_embeddings": share,
            "tie_output": True,
        },
        "train": {"max_steps": 80, "eval_every": 80, "threads": 1, "lr": 3e-3, "log_every": 100},
        "decode": LIMITS,
    }
    train(config_from_dict(raw), root / f"{norm}-{share}")
    return load(root / f"{norm}-{share}")


@pytest.fixture(scope="module", params=[("pre", True), ("post", False)], ids=["pre-shared", "post"])
def exported(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("ct2")
    m = dates_transformer(root, *request.param)
    sizes = len(m.vocabs.src_vocab), len(m.vocabs.tgt_vocab)
    out = export_ctranslate2(m.model, *sizes, root / "model")
    val = load_pairs(m.cfg)["val"]
    src = [m.source_ids(s) for s, _ in val]
    tgt = [m.vocabs.tgt_vocab[m.vocabs.tgt_tokenizer.tokenize(t)] for _, t in val]
    return m, CTranslate2Engine(out, threads=1), out, src, tgt


def _skip_without_ctranslate2_cuda(device):
    if device == "cuda" and ctranslate2.get_cuda_device_count() == 0:
        pytest.skip("this CTranslate2 build sees no CUDA device")


@functools.cache
def _cuda_engine(model_dir):
    return CTranslate2Engine(model_dir, threads=1, device="cuda")


def _on(exported, device):
    """The fixture's seqlab model and CTranslate2 engine on ``device`` (copies for CUDA: the
    fixture's model stays on the CPU for the other tests)."""
    m, engine, out, _, _ = exported
    if device == "cpu":
        return m.model, engine
    _skip_without_ctranslate2_cuda(device)
    return copy.deepcopy(m.model).to(device), _cuda_engine(str(out))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("precision", PRECISIONS)
def test_token_log_probabilities_match(exported, precision, device):
    """CTranslate2 (fp32) computes seqlab's log-probabilities: to 1e-4 in fp32, to bf16's
    rounding with bf16 forced on seqlab's side."""
    _, _, _, src, tgt = exported
    model, engine = _on(exported, device)
    theirs = engine.score(src, tgt)
    s, s_len = (t.to(device) for t in pad_sequences(src))
    t_in, _ = pad_sequences([[BOS] + t for t in tgt])
    with computing_in(precision, device):
        logp = model(s, s_len, t_in.to(device)).float().log_softmax(-1).cpu()
    for i, t in enumerate(tgt):
        labels = t + [EOS]
        ours = logp[i, torch.arange(len(labels)), torch.tensor(labels)]
        tol = SCORE_TOL[precision]
        torch.testing.assert_close(torch.tensor(theirs[i]), ours, atol=tol, rtol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("precision", PRECISIONS)
def test_greedy_and_beam_outputs_match(exported, precision, device):
    """Greedy outputs are identical, and so are the best beam hypotheses with their scores (bf16
    forced on seqlab's side: up to near-ties). Further n-best entries may differ: seqlab stops a
    sentence once it has K finished hypotheses (fairseq's rule), CTranslate2 keeps searching."""
    _, _, _, src, _ = exported
    model, engine = _on(exported, device)
    s, s_len = (t.to(device) for t in pad_sequences(src))
    with computing_in(precision, device):
        greedy = greedy_search(model, s, s_len, **LIMITS)
        beams = beam_search(model, s, s_len, beam_size=5, nbest=3, **LIMITS)
    ours = [h.tokens for h in greedy]
    theirs_greedy = [h[0].tokens for h in engine.search(src, **LIMITS)]
    assert_same_outputs(model, src, ours, theirs_greedy, precision, device=device)
    theirs = engine.search(src, beam_size=5, nbest=3, **LIMITS)
    ours_best, theirs_best = [b[0].tokens for b in beams], [b[0].tokens for b in theirs]
    assert_same_outputs(model, src, ours_best, theirs_best, precision, 1.0, device)
    same = [
        i for i, (a, b) in enumerate(zip(beams, theirs, strict=True)) if a[0].tokens == b[0].tokens
    ]
    assert len(same) >= len(beams) // 2
    torch.testing.assert_close(
        torch.tensor([theirs[i][0].score for i in same]),
        torch.tensor([beams[i][0].score for i in same]),
        atol=SCORE_TOL[precision],
        rtol=0,
    )


def test_the_length_penalty_option_reaches_ctranslate2(exported):
    """``length_penalty`` given to the run's translator ranks CTranslate2's beams as seqlab's:
    the same best outputs, each scored log_prob / (tokens + <eos>)^α."""
    m, _, _, src, _ = exported
    sources = [s for s, _ in load_pairs(m.cfg)["val"]]
    for alpha in (0.0, 2.0):
        ours = m.hypotheses(sources, beam=4, length_penalty=alpha)
        theirs = m.hypotheses(sources, beam=4, length_penalty=alpha, engine="ctranslate2")
        best = [h[0].tokens for h in ours]
        assert_same_outputs(m.model, src, best, [h[0].tokens for h in theirs], "fp32", alpha)
        for (a,), (b,) in zip(ours, theirs, strict=True):
            assert b.score == pytest.approx(a.score, abs=1e-4)
            assert a.score == pytest.approx(a.log_prob / (len(a.tokens) + 1) ** alpha)


class _Counting:
    """The engine's CTranslate2 translator, counting ``translate_batch`` calls."""

    def __init__(self, translator):
        self.translator, self.calls = translator, 0

    def __getattr__(self, name):
        return getattr(self.translator, name)

    def translate_batch(self, *args, **kwargs):
        self.calls += 1
        return self.translator.translate_batch(*args, **kwargs)


# limits that differ from sentence to sentence and bind for some: floor(0.5 * S + 3)
MIXED = {"max_len_a": 0.5, "max_len_b": 3}


@pytest.mark.parametrize(
    "options",
    [
        {"beam_size": 1},
        {"beam_size": 5},
        {"beam_size": 5, "nbest": 3},
        {"beam_size": 4, "nbest": 2, "length_penalty": 0.0},  # no early end rule: by limit
    ],
    ids=["greedy", "beam", "nbest", "beam-no-penalty"],
)
def test_a_batch_of_different_limits_decodes_as_each_sentence_alone(exported, options):
    """Sentences with different output limits go through CTranslate2 in one call where the
    search's end is provably the same as with each sentence's own limit, else again in groups:
    either way each sentence gets what it gets alone, at its limit or not."""
    m, engine, _, src, _ = exported
    limits = [int(0.5 * len(s) + 3) for s in src]
    alone = [engine.search([s], **options, **MIXED)[0] for s in src]
    at_limit = [len(h[0].tokens) >= n for h, n in zip(alone, limits, strict=True)]
    assert any(at_limit) and not all(at_limit) and len(set(limits)) > 1
    counting = _Counting(engine.translator)
    engine.translator = counting
    try:
        together = engine.search(src, **options, **MIXED)
    finally:
        engine.translator = counting.translator
    for one, other in zip(alone, together, strict=True):
        assert [h.tokens for h in one] == [h.tokens for h in other]
        torch.testing.assert_close(
            torch.tensor([h.score for h in other]), torch.tensor([h.score for h in one])
        )
    groups = len(set(limits))
    if options.get("length_penalty") == 0.0:
        assert counting.calls == groups  # one call per limit, as before
    else:
        assert counting.calls < groups  # fewer: the batch went through in one call first


@pytest.mark.parametrize("device", DEVICES)
def test_greedy_with_different_limits_matches_seqlab(exported, device):
    """Per-sentence limits that bind for some sentences: CTranslate2's greedy outputs equal
    seqlab's (the forced ``<eos>`` at the limit included)."""
    _, _, _, src, _ = exported
    model, engine = _on(exported, device)
    s, s_len = (t.to(device) for t in pad_sequences(src))
    ours = [h.tokens for h in greedy_search(model, s, s_len, **MIXED)]
    theirs = [h[0].tokens for h in engine.search(src, **MIXED)]
    assert_same_outputs(model, src, ours, theirs, "fp32", device=device)


def test_token_names_round_trip_through_the_cached_tables():
    """The names CTranslate2 sees for seqlab ids and back, from the engine's cached tables, equal
    token_name's (ints and tensor elements alike; a tensor element is not kept as a key)."""
    from seqlab.export.ctranslate2 import token_name
    from seqlab.export.ctranslate2_engine import _NAME_OF
    from seqlab.tokens import SPECIAL_TOKENS

    ids = [*range(len(SPECIAL_TOKENS)), 7, 1234, 7]
    names = CTranslate2Engine._source(ids)
    assert names == [token_name(i) for i in ids]
    assert CTranslate2Engine._source(list(torch.tensor(ids))) == names
    assert not any(isinstance(k, torch.Tensor) for k in _NAME_OF)
    assert CTranslate2Engine._ids(names) == ids


def test_cores_go_to_ctranslate2(monkeypatch):
    """``give_cores_to_ctranslate2`` leaves PyTorch one thread and keeps the others for the
    engines made afterwards."""
    import seqlab.export.ctranslate2 as ct2_export

    monkeypatch.setattr(ct2_export, "_ENGINE_THREADS", None)
    monkeypatch.setattr(ct2_export, "_ENGINE_WORKERS", 1)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert ct2_export.engine_threads() == 2
        with pytest.raises(
            SeqlabError, match="3 CTranslate2 workers need at least 3 threads, not 2"
        ):
            ct2_export.give_cores_to_ctranslate2(0, 3)
        assert torch.get_num_threads() == 2  # refused before anything changed
        assert ct2_export.engine_workers() == 1  # until called: PyTorch shares the cores
        assert ct2_export.give_cores_to_ctranslate2() == 2
        assert torch.get_num_threads() == 1 and ct2_export.engine_threads() == 2
        assert ct2_export.engine_workers() == 2  # one per thread
        assert ct2_export.give_cores_to_ctranslate2(3, 1) == 3
        assert ct2_export.engine_workers() == 1
        assert ct2_export.give_cores_to_ctranslate2(4) == 4 and ct2_export.engine_workers() == 4
    finally:
        torch.set_num_threads(before)


def test_an_engine_with_two_workers_decodes_two_batches_at_once(exported, monkeypatch):
    """With two workers (CTranslate2's inter_threads), ``hypotheses`` decodes two batches at
    once from two threads and gives what one worker gives, in input order."""
    import seqlab.export.ctranslate2 as ct2_export

    m = exported[0]
    sentences = [s for s, _ in load_pairs(m.cfg)["val"]]
    monkeypatch.setattr(ct2_export, "_ENGINE_THREADS", 2)
    monkeypatch.setattr(ct2_export, "_ENGINE_WORKERS", 1)
    one = m.hypotheses(sentences, beam=3, nbest=2, batch_size=7, engine="ctranslate2")
    monkeypatch.setattr(ct2_export, "_ENGINE_WORKERS", 2)
    engine = m.ctranslate2_engine()
    assert engine.workers == 2 and engine.translator.num_translators == 2
    search, running, most, lock = engine.search, [0], [0], threading.Lock()

    def counted(*args, **kwargs):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            time.sleep(0.05)  # long enough for the other worker's batch to start
            return search(*args, **kwargs)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(engine, "search", counted)
    two = m.hypotheses(sentences, beam=3, nbest=2, batch_size=7, engine="ctranslate2")
    assert most[0] == 2
    assert [[h.tokens for h in hyps] for hyps in two] == [[h.tokens for h in hyps] for hyps in one]
    torch.testing.assert_close(
        torch.tensor([h.score for hyps in two for h in hyps]),
        torch.tensor([h.score for hyps in one for h in hyps]),
    )
    with pytest.raises(SeqlabError, match="3 CTranslate2 workers for 2 threads"):
        CTranslate2Engine(engine.model_dir, threads=2, workers=3)


def test_int8_runs_through_the_run_directory(exported, capsys, tmp_path):
    m, _, _, src, _ = exported
    sentences = ["saturday 9 may 1998", "", "09/05/98"]
    fp32 = m.translate(sentences, engine="ctranslate2")
    assert m.precision.precision == "fp32"  # inference default, whatever the CPU
    assert fp32 == m.translate(sentences)  # same outputs as seqlab's own search
    bf16 = load(m.run.run_dir, precision="bf16")
    ids = [bf16.source_ids(x) for x in sentences]
    assert_same_outputs(
        m.model,
        ids,
        [h[0].tokens for h in bf16.hypotheses(sentences)],
        [h[0].tokens for h in m.hypotheses(sentences, engine="ctranslate2")],
        "bf16",
    )
    int8 = m.translate(sentences, engine="ctranslate2", quantize="int8")
    assert len(int8) == 3 and int8[1] == ""
    assert (m.run.run_dir / "exports").is_dir()
    inputs = tmp_path / "in.txt"
    inputs.write_text("\n".join(sentences) + "\n")
    argv = ["translate", "--run", str(m.run.run_dir), "--input", str(inputs)]
    assert main([*argv, "--engine", "ctranslate2", "--beam", "3"]) == 0
    assert main([*argv, "--beam", "3"]) == 0
    both = capsys.readouterr().out.splitlines()
    assert both[:3] == both[3:]
    assert main([*argv, "--quantize", "int8"]) == 2
    assert "--quantize applies to --engine ctranslate2" in capsys.readouterr().err


def test_export_command(exported, tmp_path, capsys):
    m = exported[0]
    out = tmp_path / "ct2"
    argv = ["export", "--format", "ctranslate2", "--run", str(m.run.run_dir)]
    assert main([*argv, "--out", str(out), "--quantize", "int8"]) == 0
    assert "int8 weights" in capsys.readouterr().out
    engine = CTranslate2Engine(out, threads=1)
    assert engine.search([m.source_ids("May 9, 1998")], **LIMITS)[0][0].tokens


def test_only_transformers_export(tmp_path, capsys):
    raw = {
        "data": {"dataset": "dates", "tokenizer": "char", "num_examples": 100, "val_examples": 5},
        "model": {"arch": "seq2seq", "embed_dim": 8, "hidden_size": 8, "num_layers": 1},
        "train": {"max_steps": 1, "eval_every": 1, "threads": 1},
        "decode": LIMITS,
    }
    train(config_from_dict(raw), tmp_path / "s2s")
    m = load(tmp_path / "s2s")
    with pytest.raises(SeqlabError, match="Transformer translation model .* not Seq2Seq"):
        export_ctranslate2(m.model, 10, 10, tmp_path / "x")
    argv = ["export", "--format", "ctranslate2", "--run", str(tmp_path / "s2s")]
    assert main([*argv, "--out", str(tmp_path / "x")]) == 2
    assert "model.arch=seq2seq" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_a_missing_package_says_how_to_install(monkeypatch, exported, tmp_path, capsys):
    real = builtins.__import__

    def no_ct2(name, *args, **kwargs):
        if name == "ctranslate2" or name.startswith("ctranslate2."):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ct2)
    m = exported[0]
    with pytest.raises(SeqlabError, match="pip install ctranslate2"):
        export_ctranslate2(m.model, 10, 10, tmp_path / "x")
    run = tmp_path / "copy"
    shutil.copytree(m.run.run_dir, run)
    assert main(["translate", "--run", str(run), "--engine", "ctranslate2"]) == 2
    assert "pip install ctranslate2" in capsys.readouterr().err


def test_ctranslate2_equals_seqlab_when_the_length_limit_binds(runs, tmp_path):
    pytest.importorskip("ctranslate2")
    run = tmp_path / "tf"
    shutil.copytree(runs / "tf", run)
    m = load(run)  # hardly trained: every output runs to its limit
    sentences = ["May 9, 1998", "1.3.1969", "saturday 9 may 1998", "x"]
    for limits in ({"max_len_a": 0.0, "max_len_b": 3}, {"max_len_a": 0.5, "max_len_b": 1}):
        m.cfg.decode.max_len_a, m.cfg.decode.max_len_b = limits["max_len_a"], limits["max_len_b"]
        for beam, nbest in ((1, 1), (3, 3)):
            ours = m.hypotheses(sentences, beam=beam, nbest=nbest)
            theirs = m.hypotheses(sentences, beam=beam, nbest=nbest, engine="ctranslate2")
            bound = 0
            for a, b, s in zip(ours, theirs, sentences, strict=True):
                limit = math.floor(limits["max_len_a"] * len(m.source_ids(s)) + limits["max_len_b"])
                bound += sum(len(h.tokens) == limit for h in a)
                assert [h.tokens for h in a] == [h.tokens for h in b]
                for h, k in zip(a, b, strict=True):
                    assert k.score == pytest.approx(h.score, abs=1e-4)
            assert bound >= len(sentences)  # the limit binds


def test_a_compute_type_the_cpu_cannot_run_is_refused(runs, tmp_path, capsys, monkeypatch):
    ctranslate2 = pytest.importorskip("ctranslate2")
    monkeypatch.setattr(ctranslate2, "get_supported_compute_types", lambda d: {"float32", "int8"})
    run = tmp_path / "tf"
    shutil.copytree(runs / "tf", run)
    src = tmp_path / "in.txt"
    src.write_text("May 9, 1998\n")
    base = ["translate", "--run", run, "--input", src, "--engine", "ctranslate2"]
    for kind in ("bfloat16", "int16"):
        fails(capsys, [*base, "--quantize", kind], f"--quantize {kind}", "supports: float32, int8")
        with pytest.raises(SeqlabError, match="supports"):
            load(run).translate(["May 9, 1998"], engine="ctranslate2", quantize=kind)
    assert not (run / "exports").exists()  # refused before any export
    succeeds(capsys, [*base, "--quantize", "int8"])


EXPORT = ["export", "--format", "ctranslate2", "--run"]


needs_ct2 = pytest.mark.skipif(
    importlib.util.find_spec("ctranslate2") is None, reason="ctranslate2 is not installed"
)


@needs_ct2
def test_export_refuses_a_folder_holding_the_users_files(runs, tmp_path, capsys):
    out = tmp_path / "mine"
    before = users_folder(out, **{"notes.txt": "precious", "model.bin": "my own model"})
    fails(capsys, [*EXPORT, runs / "mt", "--out", out], out, "notes.txt", "not an earlier")
    assert snapshot(out) == before


@needs_ct2
def test_export_refuses_the_current_directory_and_its_parents(runs, tmp_path, capsys, monkeypatch):
    here = tmp_path / "my-folder" / "deeper"
    before = users_folder(here, **{"thesis.tex": "precious"})
    monkeypatch.chdir(here)
    fails(capsys, [*EXPORT, runs / "mt", "--out", "."], "current directory")
    fails(capsys, [*EXPORT, runs / "mt", "--out", ".."], "current directory or holds it")
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)  # even an empty current directory: it would be replaced
    fails(capsys, [*EXPORT, runs / "mt", "--out", "."], "current directory")
    assert snapshot(tmp_path / "my-folder" / "deeper") == before and empty.is_dir()


@needs_ct2
def test_export_refuses_the_run_being_exported_and_other_runs(runs, tmp_path, capsys):
    run = tmp_path / "mt"
    shutil.copytree(runs / "mt", run)
    before = snapshot(run)
    fails(capsys, [*EXPORT, run, "--out", run], "the run being exported")
    fails(capsys, [*EXPORT, run, "--out", tmp_path], "holding the run being exported")
    other = tmp_path / "lm"
    shutil.copytree(runs / "lm", other)
    other_before = snapshot(other)
    fails(capsys, [*EXPORT, run, "--out", other], other, "training run")
    assert snapshot(run) == before and snapshot(other) == other_before
    assert main(["translate", "--run", str(run), "--input", os.devnull]) == 0


@needs_ct2
def test_export_replaces_only_its_own_earlier_export(runs, tmp_path, capsys):
    out = tmp_path / "ct2"
    assert main([*EXPORT, str(runs / "mt"), "--out", str(out)]) == 0
    info = json.loads((out / "seqlab.json").read_text())
    assert set(info["files"]) == {p.name for p in out.iterdir()} - {"seqlab.json"}
    assert main([*EXPORT, str(runs / "mt"), "--out", str(out), "--quantize", "int8"]) == 0
    assert json.loads((out / "seqlab.json").read_text())["quantization"] == "int8"
    assert not list(tmp_path.glob(".ct2.*"))  # no temporary or set-aside folder left
    capsys.readouterr()
    (out / "README.md").write_text("my notes on this export")
    fails(capsys, [*EXPORT, runs / "mt", "--out", out], "README.md", "did not write")
    assert (out / "README.md").read_text() == "my notes on this export"
    (out / "README.md").unlink()
    (out / "config.json").write_text("{}")  # edited by the user since
    fails(capsys, [*EXPORT, runs / "mt", "--out", out], "config.json", "changed since")
    assert (out / "config.json").read_text() == "{}"


@needs_ct2
def test_export_refuses_a_symlink_and_the_library_keeps_the_same_rule(runs, tmp_path, capsys):
    from seqlab.export.ctranslate2 import export_ctranslate2

    target = tmp_path / "real"
    before = users_folder(target, **{"a.txt": "mine"})
    link = tmp_path / "link"
    link.symlink_to(target)
    fails(capsys, [*EXPORT, runs / "mt", "--out", link], "symbolic link")
    m = load(runs / "mt")
    with pytest.raises(SeqlabError, match="not an earlier CTranslate2 export"):
        export_ctranslate2(m.model, len(m.vocabs.src_vocab), len(m.vocabs.tgt_vocab), target)
    assert link.is_symlink() and snapshot(target) == before


# ------------------------------------------------------------------------ model.positions
def tiny_transformer(positions, norm="pre", attention="softmax", vocab=20, steps=0):
    """A tiny Transformer; ``steps`` of training to reverse sequences give it outputs that
    differ from source to source (an untrained one repeats one token)."""
    from seqlab.config import TransformerConfig
    from seqlab.data.translation_batching import Batch
    from seqlab.models.transformer_seq2seq import TransformerSeq2Seq

    torch.manual_seed(0)
    cfg = TransformerConfig(
        d_model=32,
        num_heads=4,
        encoder_layers=2,
        decoder_layers=2,
        d_ff=64,
        dropout=0.0,
        max_len=64,
        norm=norm,
        positions=positions,
        attention=attention,
    )
    model = TransformerSeq2Seq(vocab, vocab, cfg)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    for _ in range(steps):
        xs = [torch.randint(4, vocab, (n,), generator=g).tolist() for n in range(1, 13)] * 2
        src, src_lengths = pad_sequences([x + [EOS] for x in xs])
        tgt_in, tgt_lengths = pad_sequences([[BOS] + x[::-1] for x in xs])
        tgt_out, _ = pad_sequences([x[::-1] + [EOS] for x in xs])
        batch = Batch(src, src_lengths, tgt_in, tgt_out, tgt_lengths, torch.arange(len(xs)))
        loss, _ = model.loss(batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


@functools.cache
def trained_tiny_transformer(positions, norm):
    return tiny_transformer(positions, norm, steps=60)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("positions,norm", [("rope", "pre"), ("rope", "post"), ("learned", "pre")])
def test_ctranslate2_equals_seqlab_for_rope_and_learned_positions(
    positions, norm, precision, tmp_path, device
):
    """RoPE as CTranslate2's rotary embeddings, learned tables as its position encodings: the
    same log-probabilities (1e-4 in fp32), greedy outputs and best beams with their scores."""
    _skip_without_ctranslate2_cuda(device)
    model = trained_tiny_transformer(positions, norm)
    out = export_ctranslate2(model, 20, 20, tmp_path / "ct2")
    model = copy.deepcopy(model).to(device)  # a copy: the cached model stays on the CPU
    engine = CTranslate2Engine(out, threads=1, device=device)
    g = torch.Generator().manual_seed(1)
    src = [torch.randint(4, 20, (int(n),), generator=g).tolist() + [EOS] for n in (3, 11, 6, 1)]
    tgt = [torch.randint(4, 20, (int(n),), generator=g).tolist() for n in (9, 2, 5, 14)]
    s, s_len = (t.to(device) for t in pad_sequences(src))
    t_in, _ = pad_sequences([[BOS] + t for t in tgt])
    theirs = engine.score(src, tgt)
    with computing_in(precision, device):
        logp = model(s, s_len, t_in.to(device)).float().log_softmax(-1).cpu()
        greedy = greedy_search(model, s, s_len, **LIMITS)
        beams = beam_search(model, s, s_len, beam_size=3, **LIMITS)
    for i, t in enumerate(tgt):
        labels = t + [EOS]
        ours = logp[i, torch.arange(len(labels)), torch.tensor(labels)]
        tol = SCORE_TOL[precision]
        torch.testing.assert_close(torch.tensor(theirs[i]), ours, atol=tol, rtol=0)
    ours = [h.tokens for h in greedy]
    assert len({tuple(x) for x in ours}) > 1  # outputs that tell sources apart
    theirs_greedy = [h[0].tokens for h in engine.search(src, **LIMITS)]
    assert_same_outputs(model, src, ours, theirs_greedy, precision, device=device)
    best = engine.search(src, beam_size=3, **LIMITS)
    ours_best, theirs_best = [b[0].tokens for b in beams], [b[0].tokens for b in best]
    assert_same_outputs(model, src, ours_best, theirs_best, precision, 1.0, device)
    for (a,), (b,) in zip(beams, best, strict=True):
        if a.tokens == b.tokens:
            assert b.score == pytest.approx(a.score, abs=SCORE_TOL[precision])


def test_the_catalog_says_what_the_export_writes(tmp_path):
    from seqlab import catalog

    written = {name for name, p in catalog.positions().items() if p.ctranslate2}
    assert written == {"sinusoidal", "learned", "rope"}
    for name in ("alibi", "t5_bias"):
        with pytest.raises(SeqlabError) as exc:
            export_ctranslate2(tiny_transformer(name), 20, 20, tmp_path / name)
        message = str(exc.value)
        assert len(message.splitlines()) == 1
        assert f"cannot write model.positions: {name}" in message
        assert "supports model.positions: sinusoidal, learned, rope" in message
        assert "nothing was written" in message
    with pytest.raises(SeqlabError, match="cannot write model.attention: linear.*softmax"):
        export_ctranslate2(
            tiny_transformer("sinusoidal", attention="linear"), 20, 20, tmp_path / "x"
        )
    assert list(tmp_path.iterdir()) == []


def test_an_alibi_run_is_refused_before_anything_is_written(tmp_path, capsys):
    raw = {
        "data": {"dataset": "dates", "tokenizer": "char", "num_examples": 100, "val_examples": 5},
        "model": {
            "arch": "transformer",
            "d_model": 16,
            "num_heads": 2,
            "encoder_layers": 1,
            "decoder_layers": 1,
            "d_ff": 32,
            "positions": "alibi",
        },
        "train": {"max_steps": 1, "eval_every": 1, "threads": 1},
        "decode": LIMITS,
    }
    run = tmp_path / "alibi"
    train(config_from_dict(raw), run)
    capsys.readouterr()
    before = snapshot(run)
    fails(
        capsys,
        [*EXPORT, run, "--out", tmp_path / "out"],
        "cannot write model.positions: alibi",
        "sinusoidal, learned, rope",
    )
    assert not (tmp_path / "out").exists()
    # decoding with it is refused before an export too, naming the engine that decodes it
    with pytest.raises(SeqlabError, match="cannot hold model.positions: alibi.*--engine seqlab"):
        load(run).translate(["May 9, 1998"], engine="ctranslate2")
    assert snapshot(run) == before and not (run / "exports").exists()
