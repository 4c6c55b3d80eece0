"""``seqlab evaluate``, ``translate``, ``classify``, ``forecast`` and ``generate``: trained models,
from their run directory."""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import warnings
from pathlib import Path
from typing import Any

from seqlab.cli.common import (
    STDIN,
    check_writable,
    check_writable_dir,
    non_negative_float,
    non_negative_int,
    positive_int,
    read_lines,
    read_stdin_line,
    read_stdin_lines,
    writes_into,
)
from seqlab.errors import SeqlabError
from seqlab.outputs import RULE

#: longest source/output drawn in an attention heatmap (tokens); longer ones are cut, with a note
MAX_PLOT_TOKENS = 80


def load_for(args: argparse.Namespace, task: str | None = None) -> Any:
    """Load ``--checkpoint`` and check that it is a ``task`` run (``seqlab COMMAND`` fits it)."""
    from seqlab import load

    model = load(args.checkpoint, args.which, getattr(args, "precision", None))
    if task is not None and model.task != task:
        use = " or ".join(f"`seqlab {c}`" for c in model.commands)
        raise SeqlabError(
            f"`seqlab {args.command}` needs a {task.replace('_', ' ')} run, but {args.checkpoint} "
            f"holds a {model.task.replace('_', ' ')} model (model.arch={model.cfg.model.arch}); "
            f"use {use}"
        )
    return model


# ------------------------------------------------------------------------------ evaluate
def check_finite(result: dict[str, Any]) -> None:
    """Refuse to report a score that is NaN or infinite (JSON has no such numbers, and a model
    that yields them is broken, not scored): name the values and the checkpoint."""

    def numbers(value: Any, key: str) -> list[tuple[str, float]]:
        if isinstance(value, float):
            return [(key, value)]
        if isinstance(value, dict):
            return [x for k, v in value.items() for x in numbers(v, f"{key}.{k}".lstrip("."))]
        if isinstance(value, list):
            return [x for i, v in enumerate(value) for x in numbers(v, f"{key}[{i}]")]
        return []

    bad = [(k, v) for k, v in numbers(result, "") if not math.isfinite(v)]
    if bad:
        shown = ", ".join(f"{k} = {v}" for k, v in bad[:4]) + (", ..." if len(bad) > 4 else "")
        raise SeqlabError(
            f"the model of {result['checkpoint']} gives non-finite scores ({shown}): its outputs "
            "hold NaN or infinity, so there is no score to report (did its training diverge? "
            "try another checkpoint with --which)"
        )


def cmd_evaluate(args: argparse.Namespace) -> int:
    if args.ref and args.labels:
        raise SeqlabError("--ref (translation) and --labels (classification) do not go together")
    if bool(args.src) != bool(args.ref or args.labels):
        raise SeqlabError(
            "--src goes with --ref (translation: the references) or --labels (classification: "
            "the label of each line)"
        )
    if (args.src or args.text) and args.split:
        raise SeqlabError("score either a dataset --split or your own files, not both")
    if args.output:
        check_writable(args.output)
    model = load_for(args)
    if model.task == "forecasting":
        return _evaluate_forecaster(args, model)
    if args.horizon is not None or args.plot:
        raise SeqlabError("--horizon and --plot apply to forecasting runs")
    if model.task == "classification":
        return _evaluate_classifier(args, model)
    if args.confusion_png or args.labels:
        raise SeqlabError("--confusion-png and --labels apply to classification runs")
    translation = model.task == "translation"
    if not translation and (args.src or args.beam or args.output):
        raise SeqlabError(
            "--src/--ref, --beam and --output apply to translation runs; "
            f"{args.checkpoint} holds a {model.task.replace('_', ' ')} model"
        )
    if translation and args.text:
        raise SeqlabError("--text scores a language model; for translation use --src and --ref")
    if not translation and (args.engine != "pytorch" or args.quantize):
        raise SeqlabError("--engine and --quantize apply to translation runs")
    if translation:
        check_engine(args, model)
    engine = {"engine": args.engine, "quantize": args.quantize}
    if args.src:
        sources, references = read_lines(args.src, "--src"), read_lines(args.ref, "--ref")
        if not sources and not references:
            raise SeqlabError(
                f"--src {args.src} and --ref {args.ref} are empty: there is nothing to score"
            )
        if len(sources) != len(references):
            raise SeqlabError(
                f"--src {args.src} has {len(sources)} lines but --ref {args.ref} has "
                f"{len(references)}; they must pair up line by line"
            )
        result = {
            "src": args.src,
            "ref": args.ref,
            **model.score(sources, references, beam=args.beam, **engine),
        }
    elif args.text:
        result = {"text": args.text, **model.perplexity("\n".join(read_lines(args.text, "--text")))}
    elif translation:
        result = {
            "split": args.split or "val",
            **model.evaluate_split(args.split or "val", beam=args.beam, **engine),
        }
    else:
        result = {"split": args.split or "val", **model.evaluate_split(args.split or "val")}
    result = {"checkpoint": str(model.run.checkpoint), **result}
    check_finite(result)
    outputs = result.pop("translations", None)
    if args.output and outputs is not None:
        from seqlab.io import atomic_write_text

        atomic_write_text(args.output, "".join(o + "\n" for o in outputs))
    if translation:
        decode = model.cfg.decode if args.beam is None else None
        result["beam_size"] = args.beam or (decode.beam_size if decode.strategy == "beam" else 1)
    if args.json:
        print(json.dumps(result))
        return 0
    where = result.get("split") or result.get("src") or result.get("text")
    if translation:
        print(
            f"{where}: BLEU {result['bleu']:.2f}  chrF {result['chrf']:.2f}  "
            f"(exact match {result['exact_match']:.1%}; "
            f"{result['sentences']} sentences, beam {result['beam_size']})"
        )
        print(f"  {result['bleu_signature']}")
        print(f"  {result['chrf_signature']}")
        print(
            f"{where}: paper-style BLEU {result['bleu_paper']:.2f} (lowercased, Moses-normalised "
            "and tokenised, as multi-bleu.perl on Multi30k's lc.norm.tok files)"
        )
        print(f"  {result['bleu_paper_signature']}")
    else:
        print(
            f"{where}: loss {result['loss']:.4f} nats/token, perplexity {result['perplexity']:.3f} "
            f"({result['tokens']} tokens; {result['checkpoint']})"
        )
    return 0


def _evaluate_classifier(args: argparse.Namespace, model: Any) -> int:
    """Accuracy, macro-F1 and a confusion-matrix PNG: a split, or ``--src``/``--labels`` files."""
    if args.ref or args.beam or args.output or args.engine != "pytorch" or args.quantize:
        raise SeqlabError(
            "--ref, --beam, --output, --engine and --quantize apply to translation runs; a "
            "classifier is scored on --split or on --src FILE with --labels FILE"
        )
    if args.text:
        raise SeqlabError("--text scores a language model; a classifier takes --src and --labels")
    if bool(args.src) != bool(args.labels):
        raise SeqlabError("--src and --labels go together: the sentences and their labels")
    if args.confusion_png:
        check_writable(args.confusion_png)
    if args.src:
        if model.images:
            raise SeqlabError("--src/--labels score text classifiers; this one reads images")
        texts, labels = read_lines(args.src, "--src"), read_lines(args.labels, "--labels")
        if not texts and not labels:
            raise SeqlabError(
                f"--src {args.src} and --labels {args.labels} are empty: there is nothing to score"
            )
        if len(texts) != len(labels):
            raise SeqlabError(
                f"--src {args.src} has {len(texts)} lines but --labels {args.labels} has "
                f"{len(labels)}; they must pair up line by line"
            )
        result = {"src": args.src, **model.score(texts, [x.strip() for x in labels])}
    else:
        result = model.evaluate_split(args.split)
    result = {"checkpoint": str(model.run.checkpoint), **result}
    check_finite(result)
    if args.confusion_png:
        from seqlab.plotting import plot_confusion

        plot_confusion(
            result["confusion"],
            result["labels"],
            args.confusion_png,
            title=f"{args.checkpoint}: {result.get('split') or result.get('src')}",
        )
    if args.json:
        print(json.dumps(result))
        return 0
    where = result.get("split") or result.get("src")
    print(
        f"{where}: accuracy {result['accuracy']:.2%}  macro-F1 {result['macro_f1']:.4f}  "
        f"({result['examples']} examples; {result['checkpoint']})"
    )
    if args.confusion_png:
        print(f"  confusion matrix: {args.confusion_png}")
    return 0


def _evaluate_forecaster(args: argparse.Namespace, model: Any) -> int:
    """RMSE/MAE by horizon on a split, next to persistence (and seasonal persistence)."""
    if args.src or args.ref or args.labels or args.text or args.beam or args.output:
        raise SeqlabError(
            "a forecaster is scored on a --split of its series (--horizon K steps ahead); "
            "--src/--ref/--labels/--text/--beam/--output apply to other tasks"
        )
    if args.engine != "pytorch" or args.quantize or args.confusion_png:
        raise SeqlabError("--engine, --quantize and --confusion-png do not apply to forecasting")
    if args.plot:
        check_writable(args.plot)
    split = args.split or "test"
    if split == "dev":
        raise SeqlabError("a series has train, val and test splits; --split dev is SST-2's")
    result = {
        "checkpoint": str(model.run.checkpoint),
        **model.evaluate_split(split, horizons=args.horizon),
    }
    check_finite(result)
    if args.plot:
        import torch

        from seqlab.plotting import plot_lines

        names = ("model", "persistence", "seasonal_persistence")
        horizons = torch.tensor(result["horizons"], dtype=torch.float32)
        plot_lines(
            horizons,
            {
                n.replace("_", " "): torch.tensor(result[n]["rmse"])
                for n in names
                if n in result and len(result[n]["rmse"]) == len(horizons)
            },
            args.plot,
            title=f"{args.checkpoint}: {split} RMSE by horizon",
            xlabel="horizon k (steps ahead)",
            ylabel="RMSE",
        )
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{split}: {result['steps']} target steps ({result['checkpoint']})")
    baselines = [n for n in ("persistence", "seasonal_persistence") if n in result]
    print("horizon  " + "  ".join(f"{n:>20s}" for n in ["model", *baselines]) + "   (RMSE)")
    for i, h in enumerate(result["horizons"]):
        cells = [
            result[n]["rmse"][i] if i < len(result[n]["rmse"]) else float("nan")
            for n in ["model", *baselines]
        ]
        print(f"{h:7d}  " + "  ".join(f"{c:20.3f}" for c in cells))
    if args.plot:
        print(f"  plot: {args.plot}")
    return 0


# ----------------------------------------------------------------------------- forecast
def cmd_forecast(args: argparse.Namespace) -> int:
    """The next ``--steps`` values after a series (a CSV, or the run's own), each fed back."""
    if args.png:
        check_writable(args.png)
    if (args.column or args.missing) and not args.input:
        raise SeqlabError("--column and --missing describe an --input CSV")
    model = load_for(args, "forecasting")
    if args.input:
        from seqlab.data.series import read_series_csv

        history = read_series_csv(args.input, args.column, args.missing or "error")
        source = args.input
    else:
        from seqlab.tasks.forecasting import load_series

        history = load_series(model.cfg).tolist()
        source = f"the run's series ({model.cfg.data.dataset})"
    values = model.forecast(history, args.steps)
    if args.png:
        import torch

        from seqlab.plotting import plot_series

        n = len(history)
        shown = min(n, max(4 * args.steps, 4 * model.window))
        plot_series(
            {
                "observed": (torch.arange(n - shown, n), torch.tensor(history[-shown:])),
                f"forecast ({args.steps} steps)": (
                    torch.arange(n - 1, n + args.steps),
                    torch.tensor([history[-1], *values]),
                ),
            },
            args.png,
            title=f"{args.checkpoint}: forecast after {source}",
            xlabel="time step",
            ylabel="value",
        )
        print(f"plot: {args.png}", file=sys.stderr)
    if args.json:
        print(json.dumps({"input": source, "history": len(history), "forecast": values}))
        return 0
    for step, value in enumerate(values, start=1):
        print(f"{len(history) + step - 1}\t{value:.6g}")
    return 0


# ----------------------------------------------------------------------------- classify
def cmd_classify(args: argparse.Namespace) -> int:
    """Label each input line (text models) or image file (image models), with its probability."""
    if args.input:
        lines = read_lines(args.input)
    if args.attention_png:
        check_writable_dir(args.attention_png, "--attention-png")
    model = load_for(args, "classification")
    if args.attention_png and not hasattr(model.model, "attention"):
        raise SeqlabError(
            f"--attention-png: model.arch={model.cfg.model.arch} has no self-attention to draw "
            "(transformer_classifier and vit have)"
        )
    if model.images:
        items: list[str] = list(args.files) or (lines if args.input else [])
        if not items:
            raise SeqlabError(
                "give image files to classify (PNG, JPEG, ...): seqlab classify "
                "--checkpoint RUN a.png b.png, or --input LIST"
            )
    else:
        if args.files:
            raise SeqlabError(
                "this is a text classifier: give sentences with --input FILE or on "
                "stdin, not file arguments"
            )
        items = lines if args.input else read_stdin_lines()
    numbers = list(range(1, len(items) + 1))  # input line of each item
    if not args.files:
        blank = [n for n, item in zip(numbers, items, strict=True) if not item.strip()]
        if blank:
            shown = ", ".join(map(str, blank[:10])) + (", ..." if len(blank) > 10 else "")
            warnings.warn(
                f"skipped {len(blank)} blank line(s) of {args.input or STDIN} "
                f"(line{'s' if len(blank) > 1 else ''} {shown}): "
                "a blank line has nothing to classify",
                stacklevel=2,
            )
            kept = [(n, item) for n, item in zip(numbers, items, strict=True) if item.strip()]
            numbers, items = [n for n, _ in kept], [item for _, item in kept]
    results = model.classify(items) if items else []
    for note in model.notes:
        print(f"seqlab: note: {note}", file=sys.stderr)
    for item, (label, prob) in zip(items, results, strict=True):
        print(f"{label}\t{prob:.4f}\t{item}")
    if args.attention_png:
        from seqlab.plotting import plot_self_attention

        written = []
        for index, item in zip(numbers, items, strict=True):
            names, weights = model.attention(item)
            stem = Path(args.attention_png) / f"attention-{index:04d}"
            if model.images:
                from seqlab.models.vit import attention_rollout
                from seqlab.plotting import plot_rollout

                image = model.read_images([item])[0]
                share = attention_rollout([w[None] for w in weights])[0]
                written.append(plot_rollout(image, share, f"{stem}-rollout.png", title=str(item)))
            layer = args.layer if args.layer >= 0 else len(weights) + args.layer
            if not 0 <= layer < len(weights):
                raise SeqlabError(f"--layer {args.layer}: the model has {len(weights)} layers")
            written.append(
                plot_self_attention(
                    weights[layer],
                    names,
                    f"{stem}-layer{layer}.png",
                    title=f"{str(item)[:80]} (layer {layer})",
                )
            )
        print(
            f"attention maps: {len(written)} PNG file(s) in {args.attention_png}/", file=sys.stderr
        )
    return 0


# ----------------------------------------------------------------------------- translate
def check_engine(args: argparse.Namespace, model: Any) -> None:
    """``--engine``/``--quantize`` combinations, before any work."""
    if args.quantize and args.engine != "ctranslate2":
        raise SeqlabError("--quantize applies to --engine ctranslate2")
    if args.engine == "ctranslate2":
        from seqlab.export.ctranslate2 import check_compute_type, require_ctranslate2

        require_ctranslate2()
        check_compute_type(args.quantize)
        if model.cfg.model.arch != "transformer":
            raise SeqlabError(
                f"--engine ctranslate2 runs Transformer translation models, not "
                f"model.arch={model.cfg.model.arch}"
            )
        if getattr(args, "attention_png", None):
            raise SeqlabError(
                "--attention-png needs --engine pytorch (CTranslate2 returns no attention)"
            )


def engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--engine",
        choices=["pytorch", "ctranslate2"],
        default="pytorch",
        help="decode with seqlab (pytorch) or the model exported to CTranslate2",
    )
    p.add_argument(
        "--quantize",
        choices=["int8", "int16", "bfloat16"],
        help="ctranslate2: quantized weights (e.g. int8); only the types this CPU runs are "
        "accepted (the error lists them)",
    )


def cmd_translate(args: argparse.Namespace) -> int:
    from seqlab.tasks.translation import decode_options

    if args.input:
        lines = read_lines(args.input)  # checked before loading the model
    if args.attention_png:
        check_writable_dir(args.attention_png, "--attention-png")
    model = load_for(args, "translation")
    decode = decode_options(model.cfg.decode, args.beam, args.nbest)
    check_engine(args, model)
    if args.attention_png and not model.has_attention:
        raise SeqlabError(
            f"--attention-png: model.arch={model.cfg.model.arch} has no attention over the "
            "source to draw (it encodes the source into one vector)"
        )
    written: list[Path] = []
    counter = [0]

    def run(batch: list[str]) -> None:
        found = model.hypotheses(
            batch,
            beam=args.beam,
            nbest=args.nbest,
            need_weights=bool(args.attention_png),
            engine=args.engine,
            quantize=args.quantize,
        )
        for line, hyps in zip(batch, found, strict=True):
            counter[0] += 1
            if decode.nbest > 1:
                for rank, h in enumerate(hyps[: decode.nbest]):
                    print(f"{counter[0]}\t{rank}\t{h.score:.4f}\t{model.detokenize(h.tokens)}")
            else:
                print(model.detokenize(hyps[0].tokens), flush=True)
            if args.attention_png and line.strip():
                written.append(
                    _write_alignment(args.attention_png, counter[0], line, hyps[0], model)
                )

    if args.input:
        run(lines)
    elif sys.stdin.isatty():
        print("seqlab translate: type a sentence and press Enter (Ctrl-D to quit)", file=sys.stderr)
        for number in itertools.count(1):
            print("> ", end="", file=sys.stderr, flush=True)
            line = read_stdin_line(number)
            if line is None:
                break
            run([line])
    else:
        batch = read_stdin_lines()
        if batch:
            run(batch)
    if args.attention_png:
        print(
            f"attention heatmaps: {len(written)} PNG file(s) in {args.attention_png}/",
            file=sys.stderr,
        )
    return 0


def _write_alignment(directory: str, index: int, line: str, hyp: Any, model: Any) -> Path:
    from seqlab.plotting import plot_attention

    vocabs = model.vocabs
    x_tokens = vocabs.src_vocab.to_tokens(model.source_ids(line))
    y_tokens = vocabs.tgt_vocab.to_tokens(hyp.tokens) + ["<eos>"]
    weights = hyp.attention[: len(y_tokens), : len(x_tokens)]
    title = line if len(line) <= 100 else line[:97] + "..."
    if len(x_tokens) > MAX_PLOT_TOKENS or len(y_tokens) > MAX_PLOT_TOKENS:
        title += f" (first {MAX_PLOT_TOKENS} tokens shown)"
        x_tokens, y_tokens = x_tokens[:MAX_PLOT_TOKENS], y_tokens[:MAX_PLOT_TOKENS]
        weights = weights[: len(y_tokens), : len(x_tokens)]
    return plot_attention(
        weights,
        Path(directory) / f"attention-{index:04d}.png",
        x_tokens=x_tokens,
        y_tokens=y_tokens,
        title=title,
        xlabel="source",
        ylabel="output",
    )


# ------------------------------------------------------------------------------ generate
def cmd_generate(args: argparse.Namespace) -> int:
    model = load_for(args, "language_modeling")
    text = model.generate(
        args.prefix, args.tokens, temperature=args.temperature, top_k=args.top_k, seed=args.seed
    )
    print(text)
    return 0


# -------------------------------------------------------------------------------- parser
def add_commands(sub: argparse._SubParsersAction) -> None:
    def checkpoint_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--checkpoint", required=True, metavar="RUN_DIR", help="a trained run")
        p.add_argument("--which", default="best", help="best | latest | a step number")
        p.add_argument(
            "--precision",
            choices=["fp32", "bf16"],
            help="inference precision (default: the run's decode.precision, fp32 unless set): "
            "bf16 is faster where the CPU has native bf16, and its outputs agree with fp32 up "
            "to near-tied tokens",
        )

    p = sub.add_parser(
        "evaluate",
        help="score a trained model: perplexity (language models), BLEU/chrF (translation)",
    )
    checkpoint_args(p)
    p.add_argument(
        "--split",
        choices=["train", "val", "dev", "test"],
        help="a split of the run's dataset (default: val; classifiers: the dataset's evaluation "
        "split)",
    )
    p.add_argument(
        "--src",
        metavar="FILE",
        help="translation: your source sentences (text or .gz); classification: your sentences",
    )
    p.add_argument("--labels", metavar="FILE", help="classification: the label of each --src line")
    p.add_argument(
        "--confusion-png",
        metavar="FILE",
        help="classification: draw the confusion matrix (a new or regular file)",
    )
    p.add_argument("--ref", metavar="FILE", help="translation: their references, line by line")
    p.add_argument(
        "--horizon",
        type=positive_int,
        help="forecasting: errors at 1 … K steps ahead, K at most the split's length (default "
        "12, fewer on a shorter split; split default: test)",
    )
    p.add_argument(
        "--plot", metavar="FILE", help="forecasting: draw RMSE by horizon (a new or regular file)"
    )
    p.add_argument("--text", metavar="FILE", help="language model: perplexity of this text")
    p.add_argument("--beam", type=positive_int, help="translation: beam size (1 = greedy)")
    p.add_argument(
        "--output",
        metavar="FILE",
        help="translation: also write the hypotheses here (a new or regular file, replaced "
        "atomically; a symbolic link or device is refused)",
    )
    engine_args(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser(
        "translate", help="translate lines from a file or stdin with a trained model"
    )
    checkpoint_args(p)
    p.add_argument("--input", metavar="FILE", help="one sentence a line (default: stdin)")
    p.add_argument(
        "--beam",
        type=positive_int,
        help="beam size; 1 = greedy (default: the run's decode section)",
    )
    p.add_argument(
        "--nbest",
        type=positive_int,
        help="print the K best hypotheses (needs a beam >= K): index, rank, score, text",
    )
    p.add_argument(
        "--attention-png",
        metavar="DIR",
        help=f"write one source×output heatmap per sentence into DIR: {RULE}",
    )
    engine_args(p)
    p.set_defaults(func=writes_into("attention_png", cmd_translate))

    p = sub.add_parser(
        "classify",
        help="label sentences (a file or stdin) or image files with a classifier",
        description="Label each line of --input (or standard input, UTF-8) with the most "
        "probable class: one output line LABEL<TAB>PROBABILITY<TAB>TEXT per input line. Blank "
        "lines are skipped, with a warning naming them; lines longer than the model's "
        "data.max_len tokens are cut to it, with a warning.",
    )
    checkpoint_args(p)
    p.add_argument("files", nargs="*", help="image files (image classifiers)")
    p.add_argument("--input", metavar="FILE", help="one sentence (or image path) a line")
    p.add_argument(
        "--attention-png",
        metavar="DIR",
        help="write per-head self-attention maps (and, for ViT, attention rollout on the "
        f"image) into DIR: {RULE}",
    )
    p.add_argument(
        "--layer", type=int, default=-1, help="which layer's attention to draw (default: last)"
    )
    p.set_defaults(func=writes_into("attention_png", cmd_classify))

    p = sub.add_parser(
        "forecast", help="predict the next values of a series (CSV or the run's own) k steps on"
    )
    checkpoint_args(p)
    p.add_argument(
        "--input",
        metavar="CSV",
        help="one value per row, in the last column (or --column); a first row whose value is "
        "a number is data, else it is the header. Values must be finite, within ±1e15 "
        "(default: the run's configured series)",
    )
    p.add_argument("--column", help="the CSV column holding the values (default: the last)")
    p.add_argument(
        "--missing",
        choices=["error", "interpolate", "drop"],
        help="what to do with empty or NaN values (default: error)",
    )
    p.add_argument("--steps", type=positive_int, required=True, help="values to predict")
    p.add_argument(
        "--png",
        metavar="FILE",
        help="draw the end of the series and the forecast (a new or regular file)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_forecast)

    p = sub.add_parser(
        "generate",
        help="continue a text prefix with a trained language model",
        description="Continue --prefix by --tokens tokens. The reserved tokens (<unk>, <pad>, "
        "<bos>, <eos>) are never generated.",
    )
    checkpoint_args(p)
    p.add_argument("--prefix", default="", help="text to warm up on")
    p.add_argument("--tokens", type=non_negative_int, default=200, help="tokens to generate")
    p.add_argument(
        "--temperature",
        type=non_negative_float,
        help="0 = greedy; > 0 samples, at most 100 (default: the run's decode section)",
    )
    p.add_argument(
        "--top-k", type=non_negative_int, help="sample from the k most likely tokens (0 = all)"
    )
    p.add_argument("--seed", type=int, default=0, help="sampling seed")
    p.set_defaults(func=cmd_generate)
