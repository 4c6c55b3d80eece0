"""Spoken digits in women's and men's voices: a trained FSDD run on speech synthesisers' voices.

FSDD's six speakers are all men, so a run of the shipped recipe (``fsdd-cnn``) has never heard
a woman say a digit. This benchmark makes test fixtures with speech synthesisers: the ten words
``zero`` … ``nine`` in espeak-ng's male and female voice variants (the sex each variant's file
declares on its ``gender`` line, checked here), each at five takes (three speaking rates at the
default pitch, two pitches at the default rate), and, where installed, flite's and festival's
English voices (five speaking rates each: neither changes the pitch of every voice it has).
Every clip is written as FSDD's are (8 kHz mono 16-bit: ``sox -D -r 8000 -c 1 -b 16``; not
dithered, since sox's dither is random), trimmed of leading and trailing silence (below 1 % of
full scale, ``sox silence``) and its peak set to -10 dBFS (near FSDD's median peak), then
classified through the public API (``seqlab.load(run).probabilities(paths)``). Reported per
voice, per sex and per synthesiser and sex: accuracy, the mean probability of the top answer,
the expected calibration error (15 bins; Guo et al. 2017) and the number of clips; and the same
for the run's own FSDD test split (six men, 300 clips), the reference of real male speakers.
Everything is deterministic: fixed voices, rates and pitches, no dither (the clips' SHA-256 is
recorded).

    SEQLAB_DATA_DIR=../shared/data .venv/bin/seqlab train fsdd-cnn --out runs/fsdd-cnn
    SEQLAB_DATA_DIR=../shared/data .venv/bin/python benchmarks/fsdd_voices.py runs/fsdd-cnn \\
        [--warp] [--keep DIR]

``--warp`` also measures test-time frequency-warp normalisation (VTLN-like; no synthetic clip is
trained on): each clip is read at warp factors 0.80, 0.85, … 1.20 (frequencies multiplied by
the factor), two ways: ``resample``, the clip resampled (``scipy.signal.resample_poly``) and
played at 8 kHz, which moves pitch and formants together and changes the tempo by the same
factor (through the public API); and ``mel``, the front end's mel filterbank warped (the
piecewise-linear VTLP warp the library trains with, :func:`seqlab.nn.audio_augment.vtlp_warp`),
which moves the spectral envelope and leaves the tempo. The factor is chosen without the label:
``clip_max_prob`` (the primary rule, fixed before measuring: per clip, the factor whose answer
has the highest probability), ``clip_min_entropy`` (per clip, the lowest entropy) and
``voice_max_prob`` (one factor per voice or FSDD speaker, as VTLN chooses one per speaker: the
highest mean top probability over that voice's clips). ``oracle`` (a clip is right if any factor
gets it right) uses the labels and is only a ceiling. Results go under the ``warp`` key, for
male and female synthetic voices and for the FSDD test split (which a normalisation must not
cost).

Writes ``benchmarks/results/fsdd_voices.json``: the run, the synthesisers and their versions
(and those missing), the voices and takes, the groups' scores, per-digit accuracy by sex, the
FSDD reference, the female minus male accuracy with a 95 % interval from resampling voices, with
``--warp`` the warp results (per rule also the clips it fixed and broke), seconds, the machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
RATE = 8000
DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
#: sox effects after the conversion to 8 kHz mono 16-bit: trim leading and trailing silence
#: (below 1 % of full scale; FSDD's clips are tightly trimmed), then set the peak to -10 dBFS
TRIM = ["silence", "1", "0.01", "1%", "reverse", "silence", "1", "0.01", "1%", "reverse"]
LEVEL = ["gain", "-n", "-10"]

#: espeak-ng voices: language + variant, and the sex the variant's file declares (checked).
#: Left out: the whispered (whisper, whisperf), robotic (anikaRobot, UniRobot, robosoft*),
#: novelty (Demonic, croak, AnxiousAndy, Storm) variants, and those with no gender line.
ESPEAK_VOICES: tuple[tuple[str, str], ...] = (
    *((f"{lang}+m{i}", "male") for i, lang in zip(range(1, 9), ["en-us", "en"] * 4, strict=True)),
    ("en-us+Andy", "male"),
    ("en+Lee", "male"),
    ("en-us+Denis", "male"),
    ("en+Marco", "male"),
    ("en-us+antonio", "male"),
    ("en+michel", "male"),
    ("en-us+travis", "male"),
    ("en+victor", "male"),
    ("en-us+f1", "female"),
    ("en-us+f2", "female"),
    ("en+f3", "female"),
    ("en+f4", "female"),
    ("en-us+f5", "female"),
    ("en+Alicia", "female"),
    ("en-us+Andrea", "female"),
    ("en+Annie", "female"),
    ("en-us+anika", "female"),
    ("en+aunty", "female"),
    ("en+belinda", "female"),
    ("en-us+linda", "female"),
    ("en+steph", "female"),
    ("en-us+steph2", "female"),
    ("en+steph3", "female"),
    ("en-us+grandma", "female"),
)
#: espeak-ng takes: (words per minute ``-s``, pitch 0-99 ``-p``); 175 and 50 are its defaults
ESPEAK_TAKES = ((175, 50), (140, 50), (210, 50), (175, 30), (175, 70))
#: flite's English voices (``flite -lv``; awb_time only says the time) and their speakers' sex:
#: kal and kal16 are one speaker (CMU's kal diphones at 8 and 16 kHz)
FLITE_VOICES = (("kal", "male"), ("kal16", "male"), ("awb", "male"), ("rms", "male"))
FLITE_VOICES += (("slt", "female"),)
#: festival's English voices installed by festvox-kallpc16k and festvox-us-slt-hts
FESTIVAL_VOICES = (("kal_diphone", "male"), ("cmu_us_slt_arctic_hts", "female"))
#: flite and festival takes: duration stretch (> 1: slower); their pitch is left as it is
STRETCH_TAKES = (1.0, 0.8, 0.9, 1.15, 1.3)
#: the warp factors of ``--warp`` (frequencies multiplied by the factor)
WARPS = tuple(round(0.8 + 0.05 * i, 2) for i in range(9))


@dataclass(frozen=True)
class Voice:
    synth: str  # espeak-ng, flite, festival
    name: str  # what the synthesiser calls it
    sex: str  # male, female

    @property
    def key(self) -> str:
        return f"{self.synth}:{self.name}"


@dataclass(frozen=True)
class Take:
    rate: float  # espeak-ng: words per minute; flite, festival: duration stretch
    pitch: int | None = None  # espeak-ng only

    @property
    def tag(self) -> str:
        return f"s{self.rate:g}" + ("" if self.pitch is None else f"-p{self.pitch}")


# ---------------------------------------------------------------------------- fixtures
def espeak_data_dir() -> Path:
    """espeak-ng's data directory, as ``espeak-ng --version`` names it."""
    out = subprocess.run(["espeak-ng", "--version"], capture_output=True, text=True, check=True)
    found = re.search(r"Data at:\s*(\S+)", out.stdout)
    if not found:
        raise RuntimeError(f"espeak-ng --version names no data directory: {out.stdout!r}")
    return Path(found.group(1))


def variant_sex(variant: str, data: Path | None = None) -> str | None:
    """The sex an espeak-ng variant's file declares on its ``gender`` line (``male``,
    ``female``), or None where the file has none."""
    path = (data or espeak_data_dir()) / "voices" / "!v" / variant
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split()
        if parts and parts[0] == "gender" and len(parts) > 1:
            return parts[1].lower()
    return None


def espeak_voices() -> list[Voice]:
    """:data:`ESPEAK_VOICES`, each checked to exist and to declare the sex it is listed as."""
    data = espeak_data_dir()
    voices = []
    for spec, sex in ESPEAK_VOICES:
        declared = variant_sex(spec.split("+", 1)[1], data)
        if declared != sex:
            raise RuntimeError(f"espeak-ng variant {spec}: its file says {declared}, not {sex}")
        voices.append(Voice("espeak-ng", spec, sex))
    return voices


def to_fsdd(raw: Path, out: Path) -> Path:
    """``raw`` as FSDD's clips are: 8 kHz mono 16-bit, silence trimmed, peak at -10 dBFS; not
    dithered (``-D``: sox's dither is random, and a clip must be the same every time)."""
    cmd = ["sox", "-D", str(raw), "-r", str(RATE), "-c", "1", "-b", "16", str(out), *TRIM, *LEVEL]
    subprocess.run(cmd, check=True, capture_output=True)
    return out


def synthesise(voice: Voice, word: str, take: Take, raw: Path) -> None:
    """One take of ``word`` in ``voice``, written to the WAV file ``raw`` (the synthesiser's
    own rate)."""
    if voice.synth == "espeak-ng":
        cmd = ["espeak-ng", "-v", voice.name, "-s", f"{take.rate:g}", "-p", str(take.pitch)]
        cmd += ["-w", str(raw), word]
        subprocess.run(cmd, check=True, capture_output=True)
    elif voice.synth == "flite":
        cmd = ["flite", "-voice", voice.name, "--setf", f"duration_stretch={take.rate:g}"]
        subprocess.run([*cmd, "-t", word, "-o", str(raw)], check=True, capture_output=True)
    elif voice.synth == "festival":
        if voice.name.endswith("_hts"):  # HTS voices ignore Duration_Stretch: hts_engine -r
            r = f"{1 / take.rate:.4f}"
            speed = f'(set! hts_engine_params (append hts_engine_params \'(("-r" {r}))))'
        else:
            speed = f"(Parameter.set 'Duration_Stretch {take.rate:g})"
        cmd = ["text2wave", "-eval", f"(voice_{voice.name})", "-eval", speed, "-o", str(raw)]
        subprocess.run(cmd, input=word, text=True, check=True, capture_output=True)
    else:
        raise ValueError(f"unknown synthesiser {voice.synth!r}")


def make_clip(voice: Voice, word: str, take: Take, out: Path) -> Path:
    """One FSDD-like fixture: ``word`` in ``voice`` at ``take``, as ``out``."""
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw.wav"
        synthesise(voice, word, take, raw)
        return to_fsdd(raw, out)


def synthesisers() -> tuple[dict[str, list[tuple[Voice, list[Take]]]], dict[str, str]]:
    """The voices and takes of each synthesiser found on PATH, and why the others are not."""
    found: dict[str, list[tuple[Voice, list[Take]]]] = {}
    missing: dict[str, str] = {}
    stretch = [Take(s) for s in STRETCH_TAKES]
    if shutil.which("espeak-ng"):
        takes = [Take(s, p) for s, p in ESPEAK_TAKES]
        found["espeak-ng"] = [(v, takes) for v in espeak_voices()]
    else:
        missing["espeak-ng"] = "espeak-ng not on PATH"
    if shutil.which("flite"):
        listed = subprocess.run(["flite", "-lv"], capture_output=True, text=True).stdout.split()
        found["flite"] = [(Voice("flite", n, s), stretch) for n, s in FLITE_VOICES if n in listed]
    else:
        missing["flite"] = "flite not on PATH (apt-get install flite)"
    if shutil.which("text2wave"):
        found["festival"] = [(Voice("festival", n, s), stretch) for n, s in FESTIVAL_VOICES]
    else:
        missing["festival"] = (
            "text2wave not on PATH (apt-get install festival festvox-kallpc16k festvox-us-slt-hts)"
        )
    missing["pico2wave"] = (
        "apt-get: libttspico-utils (pico2wave) has no installation candidate in this "
        "machine's sources"
    )
    return found, missing


def versions(names: Sequence[str]) -> dict[str, str]:
    """Each synthesiser's version line (the first that names a version)."""
    out = {}
    for name in names:
        r = subprocess.run([name, "--version"], capture_output=True, text=True)
        lines = [ln.strip() for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
        out[name] = next((ln for ln in lines if re.search(r"\d+\.\d", ln)), lines[0])
    return out


def make_fixtures(
    found: dict[str, list[tuple[Voice, list[Take]]]], folder: Path
) -> list[tuple[Voice, Take, int, Path]]:
    """Every clip: (voice, take, digit, path), under ``folder``."""
    clips = []
    for voices in found.values():
        for voice, takes in voices:
            where = folder / voice.synth / voice.name.replace("+", "_")
            where.mkdir(parents=True, exist_ok=True)
            for digit, word in enumerate(DIGITS):
                for take in takes:
                    path = where / f"{digit}_{take.tag}.wav"
                    clips.append((voice, take, digit, make_clip(voice, word, take, path)))
    return clips


# ------------------------------------------------------------------------------ scoring
def scores(probs: Tensor, truth: Tensor, heard: Tensor | None = None) -> dict[str, Any]:
    """Accuracy, mean top probability, ECE and n of ``probs`` ``(N, C)``; a clip the no-speech
    detector did not hear (``heard`` False, a row of zeros) is wrong, with confidence 0, and
    left out of the ECE."""
    from seqlab.tasks.classifier.calibration import expected_calibration_error

    heard = torch.ones(len(truth), dtype=torch.bool) if heard is None else heard
    right = (probs.argmax(1) == truth) & heard
    conf = probs.max(1).values * heard
    return {
        "n": len(truth),
        "accuracy": round(float(right.double().mean()), 4),
        "confidence": round(float(conf.double().mean()), 4),
        "ece": round(expected_calibration_error(probs[heard], truth[heard]), 4)
        if heard.any()
        else None,
        "no_speech": int((~heard).sum()),
    }


def gap_interval(voices: list[dict[str, Any]], draws: int = 10000) -> list[float]:
    """A 95 % interval of the female minus male accuracy, resampling voices (not clips: a
    voice's clips are not independent) within each sex with replacement; seeded."""
    rng = np.random.default_rng(0)
    acc = {
        s: np.array([v["accuracy"] for v in voices if v["sex"] == s]) for s in ("male", "female")
    }
    n = {s: np.array([v["n"] for v in voices if v["sex"] == s]) for s in ("male", "female")}
    gaps = []
    for _ in range(draws):
        pooled = {}
        for s in ("male", "female"):
            i = rng.integers(0, len(acc[s]), len(acc[s]))
            pooled[s] = float((acc[s][i] * n[s][i]).sum() / n[s][i].sum())
        gaps.append(pooled["female"] - pooled["male"])
    return [round(float(q), 4) for q in np.percentile(gaps, [2.5, 97.5])]


def per_digit(probs: Tensor, truth: Tensor) -> dict[str, float]:
    right = probs.argmax(1) == truth
    return {str(d): round(float(right[truth == d].double().mean()), 4) for d in range(10)}


@torch.no_grad()
def mel_warped(model: Any, waves: list[Tensor], alpha: float, batch: int = 64) -> Tensor:
    """Class probabilities ``(N, C)`` with the front end's mel filterbank warped by ``alpha``
    (VTLP's warp, as training's augmentation applies it), at the run's temperature."""
    from seqlab.data.audio_batching import pad_waves
    from seqlab.models.audio import Draws

    net = model.model.eval()
    out = []
    for i in range(0, len(waves), batch):
        x, lengths = pad_waves(waves[i : i + batch])
        draws = Draws(warp=torch.full((len(x),), alpha))
        feats, frames = net.features(x, lengths, draws)
        body, n = net._body_inputs(feats, frames)
        out.append((net.body(body, n).float() / net.temperature).softmax(-1))
    return torch.cat(out)


def resampled(model: Any, waves: list[Tensor], r: float) -> Tensor:
    """Class probabilities ``(N, C)`` of each clip resampled so that its frequencies are ``r``
    times what they were (and its duration ``1/r`` times), through the public API."""
    from scipy.signal import resample_poly

    f = Fraction(r).limit_denominator(100)
    items = [
        (resample_poly(w.numpy().astype(np.float64), f.denominator, f.numerator), RATE)
        for w in waves
    ]
    return model.probabilities(items)


def choose(grid: Tensor, groups: list[str], rule: str) -> Tensor:
    """The warp index per clip ``(N,)`` of probabilities ``grid`` ``(W, N, C)`` by ``rule``,
    which never reads a label; ties go to the factor nearest 1."""
    nearness = -torch.tensor([abs(a - 1.0) for a in WARPS], dtype=torch.double)[:, None] * 1e-9
    top = grid.max(-1).values.double()  # (W, N)
    if rule == "clip_max_prob":
        return (top + nearness).argmax(0)
    if rule == "clip_min_entropy":
        p = grid.double().clamp(min=1e-12)
        return ((p * p.log()).sum(-1) + nearness).argmax(0)
    if rule == "voice_max_prob":
        out = torch.zeros(grid.shape[1], dtype=torch.long)
        for g in sorted(set(groups)):
            idx = torch.tensor([i for i, x in enumerate(groups) if x == g])
            out[idx] = int((top[:, idx].mean(1) + nearness[:, 0]).argmax())
        return out
    raise ValueError(rule)


def warp_study(
    model: Any, sets: dict[str, tuple[list[Tensor], Tensor, list[str]]]
) -> dict[str, Any]:
    """For each method and rule, scores before and after on each set (name: waves, truth, the
    voice or speaker of each clip), and the factors chosen."""
    out: dict[str, Any] = {"factors": list(WARPS), "primary_rule": "clip_max_prob"}
    one = WARPS.index(1.0)
    for method, fn in (("resample", resampled), ("mel", mel_warped)):
        start = time.perf_counter()
        rows: dict[str, Any] = {}
        for name, (waves, truth, groups) in sets.items():
            grid = torch.stack([fn(model, waves, a) for a in WARPS])  # (W, N, C)
            heard = grid.sum(-1).gt(0).all(0)  # heard at every factor
            row: dict[str, Any] = {"none": scores(grid[one], truth, heard)}
            # factor 1 must be the model as served: its probabilities, unwarped
            served = model.probabilities_of(waves)
            row["factor_1_max_abs_diff"] = float((grid[one] - served)[heard].abs().max())
            row["accuracy_by_factor"] = {
                f"{a:.2f}": round(float((grid[i].argmax(1) == truth).double().mean()), 4)
                for i, a in enumerate(WARPS)
            }
            for rule in ("clip_max_prob", "clip_min_entropy", "voice_max_prob"):
                pick = choose(grid, groups, rule)
                probs = grid[pick, torch.arange(len(truth))]
                factors = torch.tensor(WARPS)[pick]
                was, now = grid[one].argmax(1) == truth, probs.argmax(1) == truth
                row[rule] = scores(probs, truth, heard) | {
                    "fixed": int((now & ~was & heard).sum()),  # wrong at factor 1, now right
                    "broken": int((was & ~now & heard).sum()),  # right at factor 1, now wrong
                    "mean_factor": round(float(factors.mean()), 4),
                    "factor_counts": {
                        f"{a:.2f}": int((pick == i).sum()) for i, a in enumerate(WARPS)
                    },
                }
            any_right = (grid.argmax(-1) == truth[None]).any(0) & heard
            row["oracle"] = {"accuracy": round(float(any_right.double().mean()), 4)}
            rows[name] = row
        rows["seconds"] = round(time.perf_counter() - start, 1)
        out[method] = rows
    return out


# ------------------------------------------------------------------------------- report
def pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def table(result: dict[str, Any]) -> str:
    """The Markdown table: voices grouped by sex, then the groups and the FSDD reference."""
    lines = ["| sex | voice | accuracy | confidence | ECE | n |", "|---|---|---|---|---|---|"]
    for sex in ("male", "female"):
        for v in (v for v in result["voices"] if v["sex"] == sex):
            lines.append(
                f"| {sex} | {v['synth']} `{v['voice']}` | {pct(v['accuracy'])} | "
                f"{pct(v['confidence'])} | {pct(v['ece'])} | {v['n']} |"
            )
    for key, s in result["by_synth_sex"].items():
        lines.append(
            f"| **{key.split('/')[1]}** | **{key.split('/')[0]}, all** | {pct(s['accuracy'])} | "
            f"{pct(s['confidence'])} | {pct(s['ece'])} | {s['n']} |"
        )
    for sex, s in result["by_sex"].items():
        lines.append(
            f"| **{sex}** | **all synthesisers** | **{pct(s['accuracy'])}** | "
            f"{pct(s['confidence'])} | {pct(s['ece'])} | {s['n']} |"
        )
    f = result["fsdd_test"]
    lines.append(
        f"| male (real) | FSDD test split, 6 speakers | {pct(f['accuracy'])} | "
        f"{pct(f['confidence'])} | {pct(f['ece'])} | {f['n']} |"
    )
    return "\n".join(lines)


def warp_table(warp: dict[str, Any]) -> str:
    lines = [
        "| method | set | none | clip_max_prob | clip_min_entropy | voice_max_prob | oracle |",
        "|---|---|---|---|---|---|---|",
    ]
    for method in ("resample", "mel"):
        for name, row in warp[method].items():
            if name == "seconds":
                continue
            cells = [pct(row[r]["accuracy"]) for r in ("none", "clip_max_prob")]
            cells += [pct(row[r]["accuracy"]) for r in ("clip_min_entropy", "voice_max_prob")]
            lines.append(
                f"| {method} | {name} | "
                + " | ".join(cells)
                + f" | {pct(row['oracle']['accuracy'])} |"
            )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a trained run of fsdd-cnn (its directory)")
    parser.add_argument("--which", default="best", help="the checkpoint: best, latest, a step")
    parser.add_argument("--keep", type=Path, help="keep the clips here (default: a temporary dir)")
    parser.add_argument("--warp", action="store_true", help="also measure test-time warping")
    parser.add_argument("--out", type=Path, default=RESULTS / "fsdd_voices.json")
    args = parser.parse_args()

    import seqlab
    from seqlab import catalog
    from seqlab.runtime.machine import machine

    start = time.perf_counter()
    found, missing = synthesisers()
    if not found:
        parser.error("no speech synthesiser on PATH (espeak-ng, flite, festival)")
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        clips = make_fixtures(found, folder)
        synth_seconds = time.perf_counter() - start
        digest = hashlib.sha256()
        for *_, path in clips:
            digest.update(path.read_bytes())
        model = seqlab.load(args.run, args.which)
        paths = [str(p) for *_, p in clips]
        probs = model.probabilities(paths)  # the public API, on the WAV files
        speech = model.speech(paths)
        waves = [model.read_clip(p, p).samples for p in paths]  # for the durations and --warp
        seconds = [len(w) / RATE for w in waves]
    heard = torch.tensor([s.heard for s in speech])
    truth = torch.tensor([d for _, _, d, _ in clips])

    def group(pick: list[int]) -> dict[str, Any]:
        idx = torch.tensor(pick)
        return scores(probs[idx], truth[idx], heard[idx]) | {
            "mean_seconds": round(float(np.mean([seconds[i] for i in pick])), 3)
        }

    keys = [v.key for v, *_ in clips]
    voices = []
    for key in dict.fromkeys(keys):
        voice = next(v for v, *_ in clips if v.key == key)
        pick = [i for i, k in enumerate(keys) if k == key]
        voices.append({"synth": voice.synth, "voice": voice.name, "sex": voice.sex} | group(pick))
    sexes = [v.sex for v, *_ in clips]
    by_sex = {s: group([i for i, x in enumerate(sexes) if x == s]) for s in ("male", "female")}
    by_synth_sex = {}
    for synth in found:
        for s in ("male", "female"):
            pick = [i for i, (v, *_) in enumerate(clips) if v.synth == synth and v.sex == s]
            if pick:
                by_synth_sex[f"{synth}/{s}"] = group(pick)
    digits_by_sex = {
        s: per_digit(probs[[x == s for x in sexes]], truth[[x == s for x in sexes]])
        for s in ("male", "female")
    }

    # the real male reference: the run's own FSDD test split, through the same path
    cfg = model.cfg
    split = catalog.datasets()[cfg.data.dataset].read(cfg.data, cfg.train.seed)["test"]
    fsdd_waves = [c.samples for c, _ in split]
    fsdd_truth = torch.tensor([model.labels.index(label) for _, label in split])
    fsdd_speakers = [c.speaker or "?" for c, _ in split]
    fsdd_probs, fsdd_speech = model.heard_of(fsdd_waves)
    fsdd_heard = torch.tensor([s.heard for s in fsdd_speech])
    fsdd = scores(fsdd_probs, fsdd_truth, fsdd_heard)
    fsdd["evaluate_accuracy"] = round(model.evaluate("test")["accuracy"], 4)
    fsdd["mean_seconds"] = round(float(np.mean([len(w) / RATE for w in fsdd_waves])), 3)
    fsdd["per_speaker_accuracy"] = {
        s: round(
            float(
                (fsdd_probs.argmax(1) == fsdd_truth)[[x == s for x in fsdd_speakers]]
                .double()
                .mean()
            ),
            4,
        )
        for s in sorted(set(fsdd_speakers))
    }
    fsdd["per_digit_accuracy"] = per_digit(fsdd_probs, fsdd_truth)

    ends = []
    if (args.run / "metrics.jsonl").is_file():
        lines = (args.run / "metrics.jsonl").read_text().splitlines()
        ends = [r for r in map(json.loads, lines) if r.get("kind") == "end"]
    result: dict[str, Any] = {
        "benchmark": "fsdd_voices",
        "run": str(args.run),
        "checkpoint": args.which,
        "config": cfg.name,
        "temperature": round(float(model.model.temperature), 4),
        "synthesisers": versions(list(found)),
        "missing": missing,
        "takes": {
            "espeak-ng": [{"wpm": s, "pitch": p} for s, p in ESPEAK_TAKES],
            "flite": [{"duration_stretch": s} for s in STRETCH_TAKES],
            "festival": [{"duration_stretch": s} for s in STRETCH_TAKES],
        },
        "processing": "sox -D IN -r 8000 -c 1 -b 16 OUT " + " ".join(TRIM + LEVEL),
        "clips": len(clips),
        "clips_sha256": digest.hexdigest(),
        "voices": voices,
        "by_sex": by_sex,
        "by_synth_sex": by_synth_sex,
        "female_minus_male_accuracy": round(
            by_sex["female"]["accuracy"] - by_sex["male"]["accuracy"], 4
        ),
        "female_minus_male_ci95_voice_bootstrap": gap_interval(voices),
        "per_digit_accuracy_by_sex": digits_by_sex,
        "fsdd_test": fsdd,
        "synthesis_seconds": round(synth_seconds, 1),
    }
    if ends:
        result["training"] = {k: ends[-1].get(k) for k in ("wall_seconds", "best", "precision")}
    print(table(result))
    lo, hi = result["female_minus_male_ci95_voice_bootstrap"]
    print(
        f"\nfemale - male accuracy: {100 * result['female_minus_male_accuracy']:+.1f} points "
        f"(95% interval, voices resampled: {100 * lo:+.1f} to {100 * hi:+.1f})"
    )
    if args.warp:
        voice_groups = [v.key for v, *_ in clips]
        sets = {}
        for s in ("male", "female"):
            pick = [i for i, x in enumerate(sexes) if x == s]
            sets[f"synthetic {s}"] = (
                [waves[i] for i in pick],
                truth[pick],
                [voice_groups[i] for i in pick],
            )
        sets["FSDD test"] = (fsdd_waves, fsdd_truth, fsdd_speakers)
        result["warp"] = warp_study(model, sets)
        print()
        print(warp_table(result["warp"]))
    result["seconds"] = round(time.perf_counter() - start, 1)
    result["machine"] = machine(model.precision.precision)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
