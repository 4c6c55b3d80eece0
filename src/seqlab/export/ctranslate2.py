"""Export the Transformer translation model to CTranslate2, and decode with it.

`CTranslate2 <https://github.com/OpenNMT/CTranslate2>`_ is an inference engine for Transformer
models with its own CPU kernels and int8 quantization. :func:`export_ctranslate2` fills a
``ctranslate2.specs.TransformerSpec`` from a :class:`~seqlab.models.transformer_seq2seq.TransformerSeq2Seq`:

- pre-norm or post-norm layers (with the final LayerNorm of pre-norm stacks), ReLU FFN,
  LayerNorm ε = 1e-5 as PyTorch's;
- self-attention's packed [W_Q; W_K; W_V] projection as is; cross-attention split into the query
  rows and the fused key/value rows;
- token embeddings multiplied by √d, shared between encoder and decoder when the model shares
  them, the output layer tied to the target embedding when it is (CTranslate2 aliases equal
  arrays);
- positions as ``model.positions`` says, read from its catalog record
  (:class:`~seqlab.catalog.PositionSpec`, ``ctranslate2``): ``sinusoidal``, seqlab's own table
  passed explicitly as the position encodings (CTranslate2's built-in one concatenates
  [sin, cos] blocks instead of interleaving them); ``learned``, the encoder's and the decoder's
  trained tables; ``rope``, CTranslate2's rotary embeddings in every self-attention layer, set to
  seqlab's rotation (pairs ``(2i, 2i+1)``, base 10000, the whole head). Refused before anything
  is written: ``alibi`` (CTranslate2's ALiBi is a decoder option only), ``t5_bias`` (not mapped
  to CTranslate2's per-layer relative attention bias) and ``model.attention: linear``
  (CTranslate2 computes softmax attention only).

**Vocabulary.** CTranslate2 reads tokens as strings. Rather than rely on the tokenizer's strings
(a character model has " " as a token; pieces may hold anything), the exported vocabularies are
seqlab's ids written as ``#<id>``, with the four special tokens under their own names; the engine
converts ids both ways, so it decodes exactly the ids seqlab would.

The engine (:class:`~seqlab.export.ctranslate2_engine.CTranslate2Engine`) decodes like
:mod:`seqlab.models.search`: the source is ``x <eos>``, decoding starts from ``<bos>``, ``<pad>``
and ``<bos>`` are never produced, beam scores are
``log p / |y|^α`` with ``<eos>`` counted, and ``<eos>`` may come first. Each sentence has its own
length limit floor(a·S + b) (sentences are decoded in groups of equal limits), and a hypothesis
that reaches it gets the ``<eos>`` seqlab forces there, in its score too: outputs and scores are
seqlab's, also when the limit binds. One difference remains: seqlab's beam search stops a
sentence once it has K finished hypotheses (fairseq's rule), while CTranslate2 may keep
searching, so n-best entries after the first can differ.

**Compute types.** ``compute_type`` (``--quantize``) must be one this machine's CPU runs
(``ctranslate2.get_supported_compute_types("cpu")``); another is refused naming those it can.

**The export folder.** An export is a folder of its own, replaced as a whole by a later export
to the same ``--out``; ``seqlab.json`` in it marks it as seqlab's and lists the SHA-256 of every
file written. :func:`check_export_dir` therefore accepts only a new or empty folder or an earlier
export whose files are all its own, unchanged; it refuses anything else (the user's files,
a training run, the run being exported, the current directory or one of its parents), and
nothing it did not write is ever deleted.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from seqlab import catalog
from seqlab.atomic import temporary_folder
from seqlab.catalog import PositionSpec
from seqlab.errors import SeqlabError
from seqlab.models.transformer_seq2seq import TransformerSeq2Seq
from seqlab.nn.attention_positions import position_spec
from seqlab.nn.positional_encoding import LearnedPositionalEncoding, SinusoidalPositionalEncoding
from seqlab.storage.outputs import sha256_file
from seqlab.storage.rundir import RunDir
from seqlab.tokens import BOS, SPECIAL_TOKENS

FORMAT = "seqlab.ctranslate2/1"
#: what an export written before ``seqlab.json`` listed its files may hold
EXPORT_FILES = {
    "config.json",
    "model.bin",
    "seqlab.json",
    "shared_vocabulary.json",
    "source_vocabulary.json",
    "target_vocabulary.json",
}
INSTALL = "pip install ctranslate2  (or `make install`, which installs seqlab's extras)"


def require_ctranslate2() -> Any:
    """The ``ctranslate2`` module, or a clear error saying how to install it."""
    try:
        import ctranslate2
    except ImportError:
        raise SeqlabError(
            f"the CTranslate2 engine is not installed; install it with: {INSTALL}"
        ) from None
    return ctranslate2


def check_compute_type(compute_type: str | None, device: str = "cpu") -> None:
    """Refuse a CTranslate2 compute type (``--quantize``) this machine's CPU (or GPU, with
    ``device="cuda"``) cannot run, naming the ones it can (None and
    ``float32``/``default``/``auto`` always run)."""
    if compute_type in (None, "float32", "default", "auto"):
        return
    supported = sorted(require_ctranslate2().get_supported_compute_types(device))
    if compute_type not in supported:
        where = "GPU" if device == "cuda" else "CPU"
        raise SeqlabError(
            f"--quantize {compute_type}: this {where} cannot run CTranslate2's {compute_type} "
            f"computation; it supports: {', '.join(supported)}"
        )


def token_name(i: int) -> str:
    """The string CTranslate2 sees for seqlab id ``i``."""
    return SPECIAL_TOKENS[i] if i < len(SPECIAL_TOKENS) else f"#{i}"


def _np(t: Any) -> np.ndarray:
    return t.detach().cpu().float().numpy()


def _linear(spec: Any, weight: Any, bias: Any = None) -> None:
    spec.weight = _np(weight)
    if bias is not None:
        spec.bias = _np(bias)


def _norm(spec: Any, ln: nn.LayerNorm) -> None:
    spec.gamma, spec.beta = _np(ln.weight), _np(ln.bias)


def _attention(spec: Any, mha: nn.Module, self_attention: bool) -> None:
    w, b = mha.in_proj.weight, mha.in_proj.bias
    d = mha.d_model
    if self_attention:  # [W_Q; W_K; W_V], as CTranslate2 fuses them
        _linear(spec.linear[0], w, b)
    else:  # queries from the decoder, keys and values from the encoder
        _linear(spec.linear[0], w[:d], None if b is None else b[:d])
        _linear(spec.linear[1], w[d:], None if b is None else b[d:])
    _linear(spec.linear[-1], mha.out_proj.weight, mha.out_proj.bias)


def _ffn(spec: Any, ffn: nn.Module, ln: nn.LayerNorm) -> None:
    _norm(spec.layer_norm, ln)
    _linear(spec.linear_0, ffn.linear1.weight, ffn.linear1.bias)
    _linear(spec.linear_1, ffn.linear2.weight, ffn.linear2.bias)


def scheme_problem(cfg: Any) -> str | None:
    """What of a Transformer's config ``cfg`` CTranslate2 cannot hold (``model.positions:
    alibi; it supports ...``), or None: its attention must be softmax and its position scheme
    one CTranslate2 computes (:attr:`~seqlab.catalog.PositionSpec.ctranslate2`)."""
    if cfg.attention != "softmax":
        return (
            f"model.attention: {cfg.attention} (CTranslate2 computes softmax attention only); it "
            "supports model.attention: softmax"
        )
    if position_spec(cfg.positions).ctranslate2 is None:
        supported = [name for name, p in catalog.positions().items() if p.ctranslate2]
        return f"model.positions: {cfg.positions}; it supports model.positions: " + ", ".join(
            supported
        )
    return None


def exported_positions(model: TransformerSeq2Seq) -> PositionSpec:
    """The record of ``model``'s ``model.positions``, or a one-line error when CTranslate2
    cannot hold the model (:func:`scheme_problem`)."""
    problem = scheme_problem(model.cfg)
    if problem is not None:
        raise SeqlabError(f"CTranslate2 export cannot write {problem} (nothing was written)")
    return position_spec(model.cfg.positions)


def _position_table(embed: nn.Module) -> Any:
    """An absolute scheme's table ``(L, d)``: the learned weights, or the sinusoidal buffer."""
    position = embed.position
    if isinstance(position, LearnedPositionalEncoding):
        return _np(position.weight)
    assert isinstance(position, SinusoidalPositionalEncoding)
    return _np(position.table)


def build_spec(model: nn.Module, src_vocab_size: int, tgt_vocab_size: int) -> Any:
    """The ``TransformerSpec`` holding ``model``'s weights and vocabularies."""
    ct2 = require_ctranslate2()
    from ctranslate2.specs import transformer_spec

    if not isinstance(model, TransformerSeq2Seq):
        raise SeqlabError(
            f"CTranslate2 export supports the Transformer translation model (model.arch: "
            f"transformer), not {type(model).__name__}"
        )
    cfg = model.cfg
    positions = exported_positions(model)
    # RoPE: seqlab rotates pairs (2i, 2i+1) of the whole head (rotary_dim 0), θ_i = 10000^(-2i/d)
    rotary = {} if positions.absolute else {"rotary_dim": 0, "rotary_interleave": True}
    common = {"pre_norm": cfg.norm == "pre", "activation": ct2.specs.Activation.RELU}
    spec = transformer_spec.TransformerSpec(
        transformer_spec.TransformerEncoderSpec(
            cfg.encoder_layers, cfg.num_heads, **common, **rotary
        ),
        transformer_spec.TransformerDecoderSpec(
            cfg.decoder_layers, cfg.num_heads, **common, **rotary
        ),
    )
    enc, dec = model.encoder, model.decoder
    spec.encoder.embeddings[0].weight = _np(enc.embed.token.weight)
    spec.encoder.scale_embeddings = True  # × √d
    if positions.absolute:
        spec.encoder.position_encodings.encodings = _position_table(enc.embed)  # (L, d)
    for layer, block in zip(spec.encoder.layer, enc.blocks, strict=True):
        _attention(layer.self_attention, block.self_attn, self_attention=True)
        _norm(layer.self_attention.layer_norm, block.addnorm1.ln)
        _ffn(layer.ffn, block.ffn, block.addnorm2.ln)
    shared = dec.embed.token.weight is enc.embed.token.weight
    target = spec.encoder.embeddings[0].weight if shared else _np(dec.embed.token.weight)
    spec.decoder.embeddings.weight = target
    spec.decoder.scale_embeddings = True
    if positions.absolute:
        spec.decoder.position_encodings.encodings = _position_table(dec.embed)  # (L, d)
    tied = model.output.weight is dec.embed.token.weight
    spec.decoder.projection.weight = target if tied else _np(model.output.weight)
    for layer, block in zip(spec.decoder.layer, dec.blocks, strict=True):
        _attention(layer.self_attention, block.self_attn, self_attention=True)
        _norm(layer.self_attention.layer_norm, block.addnorm1.ln)
        _attention(layer.attention, block.cross_attn, self_attention=False)
        _norm(layer.attention.layer_norm, block.addnorm2.ln)
        _ffn(layer.ffn, block.ffn, block.addnorm3.ln)
    if cfg.norm == "pre":
        _norm(spec.encoder.layer_norm, enc.final_norm)
        _norm(spec.decoder.layer_norm, dec.final_norm)
    spec.register_source_vocabulary([token_name(i) for i in range(src_vocab_size)])
    spec.register_target_vocabulary([token_name(i) for i in range(tgt_vocab_size)])
    names = SPECIAL_TOKENS
    spec.config.unk_token, spec.config.bos_token, spec.config.eos_token = (
        names[0],
        names[2],
        names[3],
    )
    spec.config.decoder_start_token = names[BOS]
    spec.config.add_source_eos = False  # the engine passes seqlab's own source, <eos> included
    spec.config.layer_norm_epsilon = 1e-5
    return spec


def _sha256(path: Path) -> str:
    return sha256_file(path)


def foreign_export_files(out_dir: Path) -> list[str] | None:
    """Files of ``out_dir`` that an earlier export did not write (or that changed since);
    None when ``out_dir`` is not an export (no ``seqlab.json`` of this format)."""
    try:
        info = json.loads((out_dir / "seqlab.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        return None
    listed = info.get("files")
    foreign = []
    for entry in sorted(out_dir.iterdir()):
        if entry.name == "seqlab.json":
            continue
        if entry.is_symlink() or not entry.is_file():
            foreign.append(entry.name)
        elif isinstance(listed, dict):
            if listed.get(entry.name) != _sha256(entry):
                foreign.append(entry.name)
        elif entry.name not in EXPORT_FILES:
            foreign.append(entry.name)
    return foreign


def check_export_dir(out_dir: str | Path, run_dir: str | Path | None = None) -> Path:
    """Refuse, before any work, an ``--out`` that the export may not replace.

    Accepted: a folder that does not exist, an empty one, or an earlier export by seqlab that
    holds only its own files. Refused, naming why: a file or a symbolic link, the current
    directory or one of its parents, the run being exported (``run_dir``) or a folder holding
    it, a training run, and any folder with files the export did not write.
    """
    out = Path(out_dir)
    if out.is_symlink():
        raise SeqlabError(
            f"--out {out} is a symbolic link; give the path of a new folder (nothing was written)"
        )
    if out.exists() and not out.is_dir():
        raise SeqlabError(f"--out {out} exists and is not a directory (nothing was written)")
    new = "give a new folder, e.g. --out " + str(out / "ctranslate2") + " (nothing was written)"
    where = out.resolve()
    cwd = Path.cwd().resolve()
    if where == cwd or where in cwd.parents:
        raise SeqlabError(
            f"--out {out} is the current directory{'' if where == cwd else ' or holds it'}; an "
            f"export replaces its --out folder as a whole: {new}"
        )
    if run_dir is not None:
        run = Path(run_dir).resolve()
        if where == run or where in run.parents:
            raise SeqlabError(
                f"--out {out} is {'the run being exported' if where == run else 'a folder holding the run being exported'} "
                f"({run_dir}); an export replaces its --out folder as a whole: {new}"
            )
    if not out.is_dir() or not any(out.iterdir()):
        return out
    if RunDir(out).holds_training_files():
        raise SeqlabError(
            f"--out {out} holds a training run; an export replaces its --out folder as a whole: "
            f"{new}"
        )
    foreign = foreign_export_files(out)
    if foreign is None:
        names = sorted(p.name for p in out.iterdir())
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        raise SeqlabError(
            f"--out {out} is not empty and not an earlier CTranslate2 export by seqlab (it holds "
            f"{shown}); seqlab never replaces your files: {new}"
        )
    if foreign:
        raise SeqlabError(
            f"--out {out} is an earlier export but also holds files the export did not write "
            f"(or that changed since): {', '.join(foreign[:5])}; seqlab never replaces your "
            f"files: move them away or {new}"
        )
    return out


def export_ctranslate2(
    model: nn.Module,
    src_vocab_size: int,
    tgt_vocab_size: int,
    out_dir: str | Path,
    origin: dict[str, Any] | None = None,
    quantization: str | None = None,
) -> Path:
    """Write ``model`` as a CTranslate2 model directory, atomically.

    ``origin`` (e.g. the checkpoint) is recorded in ``seqlab.json`` beside the weights, with the
    SHA-256 of each file. ``quantization`` (``int8``, ``int16``, ``bfloat16``) stores quantized
    weights; a float32 export can also be quantized when the engine loads it (``compute_type``).
    ``out_dir`` must be new, empty or an earlier export (:func:`check_export_dir`); an earlier
    export is replaced only once the new one is complete.
    """
    out_dir = check_export_dir(out_dir)
    spec = build_spec(model, src_vocab_size, tgt_vocab_size)
    spec.validate()
    spec.optimize(quantization=quantization)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_folder(out_dir.parent, f".{out_dir.name}.")
    old = None
    try:
        spec.save(str(tmp))
        info = {
            "format": FORMAT,
            "vocabulary": "#<id>",
            "quantization": quantization or "float32",
            **(origin or {}),
            "files": {p.name: _sha256(p) for p in sorted(tmp.iterdir())},
        }
        (tmp / "seqlab.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        check_export_dir(out_dir)  # again: it may have changed while the model was written
        if out_dir.exists():  # an empty folder or an earlier export: set aside, then removed
            old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old.", dir=out_dir.parent))
            os.replace(out_dir, old / "export")
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not out_dir.exists() and (old / "export").exists():
            os.replace(old / "export", out_dir)  # put the earlier export back
        raise
    finally:
        if old is not None and out_dir.exists():
            shutil.rmtree(old, ignore_errors=True)
    return out_dir


#: the thread count :func:`give_cores_to_ctranslate2` kept for CTranslate2 (None: not called)
_ENGINE_THREADS: int | None = None
#: batches CTranslate2 engines made now decode at once (:func:`give_cores_to_ctranslate2`)
_ENGINE_WORKERS: int = 1


def give_cores_to_ctranslate2(threads: int = 0, workers: int = 0) -> int:
    """Let CTranslate2 have the process's cores: PyTorch drops to one thread and CTranslate2
    engines made afterwards use ``threads`` (0: PyTorch's count before the call), split among
    ``workers`` batches decoded at once (0: one per thread; see
    :class:`~seqlab.export.ctranslate2_engine.CTranslate2Engine`).

    CTranslate2 ships its own OpenMP runtime; once PyTorch's OpenMP pool has started in the same
    process with more than one thread, CTranslate2's multi-threaded decoding of small batches
    slows several-fold (``benchmarks/serve_load.py`` measures it). Call this before any PyTorch
    work (before :func:`seqlab.load`): the CLI and ``seqlab serve`` do when CTranslate2 decodes.
    Returns the engines' thread count.

    Raises:
        SeqlabError: more workers than threads (each worker needs a thread of its own).
    """
    import torch

    global _ENGINE_THREADS, _ENGINE_WORKERS
    threads = threads or _ENGINE_THREADS or torch.get_num_threads()
    workers = workers or threads
    if workers > threads:
        raise SeqlabError(
            f"{workers} CTranslate2 workers need at least {workers} threads, not {threads}"
        )
    _ENGINE_THREADS, _ENGINE_WORKERS = threads, workers
    torch.set_num_threads(1)
    return _ENGINE_THREADS


def engine_threads() -> int:
    """The thread count of CTranslate2 engines made now: the one kept by
    :func:`give_cores_to_ctranslate2`, else PyTorch's."""
    import torch

    return _ENGINE_THREADS or torch.get_num_threads()


def engine_workers() -> int:
    """How many batches CTranslate2 engines made now decode at once: those of
    :func:`give_cores_to_ctranslate2`, else 1 (PyTorch shares the cores)."""
    return _ENGINE_WORKERS
