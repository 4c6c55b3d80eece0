"""Run the shell and Python blocks of README.md and the docs site's pages as a reader would, at
a tiny budget (tests/test_doc_blocks.py, tests/test_doc_blocks_datasets.py); the tutorials
(``docs/tutorials/``) have their own runner, ``docs/_hooks/notebooks.py``.

Each page runs in a sandbox of its own, ``<tmp>/<page>/main``: ``configs/`` is the repository's,
``../shared/data`` the datasets (``$SEQLAB_DATA_DIR``), and the small made-up files of
:data:`FILES` are there, with the page's YAML blocks that name their file on their first line
(``# my-lm.yaml``). The blocks run in page order: shell blocks with ``bash -euo pipefail`` (the
``$ `` lines of a ``console`` block, not the lines they print), Python blocks with the venv's
Python (the ``>>>`` lines; the values a ``>>>`` block shows are not compared: they are the full
budget's, and the runs here train for a few steps). ``PATH`` starts with the venv's ``bin``,
``OMP_NUM_THREADS=1``, ``SEQLAB_OFFLINE=1``; ``curl`` fails on an HTTP error; a Python block's
``seqlab.cli.main`` raises when it fails.

A run directory a block reads that no block of its page trains (``runs/demo/transformer``) is
trained once per session by :data:`RUNS`, from the real config at a tiny budget, and copied in.
A block that needs a real dataset (a config or run of one, ``seqlab data fetch NAME``) runs only
when ``$SEQLAB_DATA_DIR`` is set. A block that reads a run, or calls a server, of an earlier block
fails or is skipped with it; the others run whatever came before. A block whose commands all run
in a block of another page (the README's, on the home page) is not run twice.

Comments on the lines right before a block's fence steer it at test time, and nowhere else:

- ``<!-- smoke: ARGS -->``: ``ARGS`` appended to each ``seqlab`` command, as in the tutorials
  (read by ``smoke_args``, applied by ``with_args`` of ``docs/_hooks/notebooks.py``);
- ``<!-- smoke-train: ARGS -->``: ``ARGS`` added to each ``seqlab train CONFIG`` command after
  its ``key=value`` overrides (``seqlab train`` takes none after ``--out``; later values win),
  to ``torchrun ... -m seqlab train`` and to a Python block's ``main(["train", ...])``; not to
  ``--resume``, which refuses data and model keys;
- ``<!-- smoke-sub: OLD => NEW -->``: the block's text ``OLD`` becomes ``NEW`` (``OLD`` must be
  there), for what differs between commands (the budgets of successive ``--resume``);
- ``<!-- smoke-port: 8000 -->``: that port becomes a free one (``:8000``, ``--port 8000``), and a
  ``seqlab serve`` without ``--port`` gets it. Each ``seqlab serve`` starts in the background and
  is waited for until ``/health`` answers; one written in the foreground is then stopped
  (SIGTERM) and must exit cleanly, one written with ``&`` runs until the page is done;
- ``<!-- smoke-skip: REASON -->``: not run; the tests list it, with its reason.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from conftest import docs_hook

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
HOOK = DOCS / "_hooks" / "notebooks.py"
BIN = Path(sys.executable).parent
SHELL = {"", "sh", "bash", "shell", "console"}
PYTHON = {"python", "py"}
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
DIRECTIVE = re.compile(r"^<!--\s*(smoke(?:-[a-z]+)?):\s*(.*?)\s*-->\s*$")
DIRECTIVES = {"smoke", "smoke-train", "smoke-sub", "smoke-port", "smoke-skip"}
RUN = re.compile(r"(?<![\w/.$-])runs/[\w.$/-]*[\w$]")
CREATED = re.compile(r"""--out["',\s]+(runs/[\w.$/-]*[\w$])""")
CONFIG = re.compile(r"(?<![\w/.-])(?:configs/[\w.-]+|[\w.-]+)\.ya?ml\b")
DATASET_OVERRIDE = re.compile(r"\bdata\.dataset=([\w-]+)")
FETCH = re.compile(r"\bseqlab\s+data\s+(?:fetch|stats)\s+([\w-]+)")
#: a packaged config by name (``seqlab train cmn-eng-zh-en-transformer``), a shell variable in it
#: standing for any part (``cmn-eng-$r``)
PACKAGED = re.compile(r"\bseqlab\s+train\s+([\w$.-]+)(?=\s|$)")
TRAIN = re.compile(r"(?:^|[\s;&|(])(?:-m\s+)?seqlab\s+train\s")

# --------------------------------------------------------------------- what the pages read
_LM = (
    "it was the best of times, it was the worst of times, it was the age of wisdom, it was the "
    "age of foolishness, it was the epoch of belief, it was the epoch of incredulity.\n"
)
_POS = ["a great film", "truly wonderful acting", "great fun", "a wonderful story", "loved it"]
_NEG = ["a dull film", "truly awful acting", "a boring mess", "an awful story", "hated it"]
_NUMBERS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
_ZAHLEN = ["eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun", "zehn"]

#: the files the pages' commands read, tiny and made up (a YAML block of the page that names the
#: same file on its first line wins)
FILES: dict[str, str] = {
    "input.txt": "A man rides a bike.\nTwo dogs play in the snow.\n",
    "news.en": "A woman reads a newspaper.\nChildren play football in a park.\n",
    "test.en": "A man rides a bike.\nA dog runs on the beach.\n",
    "test.de": "Ein Mann fährt Fahrrad.\nEin Hund rennt am Strand.\n",
    "my-book.txt": _LM * 24,
    "chapter.txt": "it was the age of belief, it was the epoch of wisdom.\n" * 4,
    "reviews.tsv": "".join(
        f"{t}\tpos\n{u}\tneg\n" for t, u in zip(_POS, _NEG, strict=True) for _ in range(4)
    ),
    "sentences.txt": "a wonderful film\nan awful mess\n",
    "test.txt": "a great story\na dull film\ntruly wonderful\nhated the acting\n",
    "test-labels.txt": "pos\nneg\npos\nneg\n",
    "demand.csv": "day,units\n"
    + "".join(f"{t},{100 + 20 * ((t * 7) % 12 - 6) + t // 10}\n" for t in range(400)),
    "latest.csv": "day,units\n" + "".join(f"{t},{90 + 3 * (t % 12)}\n" for t in range(48)),
    # 1,100 pairs: the page's reader holds out the last 1,000
    "pairs.tsv": "".join(
        f"{_NUMBERS[i % 10]} {_NUMBERS[i // 10 % 10]}\t{_ZAHLEN[i % 10]} {_ZAHLEN[i // 10 % 10]}\n"
        for i in range(1100)
    ),
}

_DATES = "train.max_steps=3 data.num_examples=200 data.val_examples=20"
_M30 = (
    "train.max_steps=2 data.num_examples=100 data.subword.vocab_size=200 data.batch_tokens=500 "
    "decode.max_len_a=0 decode.max_len_b=3"
)
_M30_TRANSFORMER = (
    f"{_M30} model.d_model=16 model.d_ff=16 model.encoder_layers=1 model.decoder_layers=1"
)
_M30_RNN = f"{_M30} model.embed_dim=16 model.hidden_size=16"

#: the run directories the pages read without training them: the command that trains each here,
#: from the real config at a tiny budget (in a folder holding configs/ and FILES; runs/my-lm
#: also the YAML blocks of docs/howto/own-data.md, which trains it)
RUNS: dict[str, str] = {
    "runs/demo/transformer": f"seqlab train configs/dates-transformer.yaml {_DATES}",
    "runs/demo/bahdanau": f"seqlab train configs/dates-bahdanau.yaml {_DATES}",
    "runs/m30-en-de-transformer": f"seqlab train configs/multi30k-en-de-transformer.yaml {_M30_TRANSFORMER}",
    "runs/m30-de-en-transformer": f"seqlab train configs/multi30k-de-en-transformer.yaml {_M30_TRANSFORMER}",
    "runs/m30-en-fr-transformer": f"seqlab train configs/multi30k-en-fr-transformer.yaml {_M30_TRANSFORMER}",
    "runs/m30-en-de-bahdanau": f"seqlab train configs/multi30k-en-de-bahdanau.yaml {_M30_RNN}",
    "runs/m30-en-de-seq2seq": f"seqlab train configs/multi30k-en-de-seq2seq.yaml {_M30_RNN}",
    "runs/sst2-transformer": "seqlab train configs/sst2-transformer.yaml train.max_steps=2 "
    "data.num_examples=200 data.val_examples=20 model.d_model=16 model.d_ff=16",
    "runs/tm-lstm": "seqlab train configs/timemachine-char-lstm.yaml train.max_steps=2 "
    "model.hidden_size=16",
    "runs/sunspots-gru": "seqlab train configs/sunspots-gru.yaml train.epochs=1",
    "runs/my-lm": "seqlab train my-lm.yaml train.epochs=1 model.hidden_size=16",
}
RUN_PAGES = {"runs/my-lm": "docs/howto/own-data.md"}
#: the pages test_doc_blocks_datasets.py runs (their blocks need Multi30k, Tatoeba or FSDD, all
#: but the audio page's folder of tones: three minutes of the two files' six); test_doc_blocks.py
#: runs the others
DATASET_PAGES = (
    "docs/howto/audio.md",
    "docs/howto/ctranslate2.md",
    "docs/howto/distributed.md",
    "docs/howto/ensembles.md",
    "docs/reference/data.md",
    "docs/results.md",
)
#: the pages whose blocks run in the default tier (``make test``): each page's blocks in under ten
#: seconds in all (2 cores, AVX2, measured with ``pytest --durations``); the others train several
#: runs (17-200 s a page) and run in the full tier (``make test-all``). A page's blocks run in page
#: order, so a page is in one tier whole.
FAST_PAGES = frozenset(
    {
        "README.md",
        "docs/index.md",
        "docs/howto/serve.md",
        "docs/howto/gpu.md",
        "docs/reference/python.md",
        "docs/design/extending.md",
    }
)


def by_tier(blocks: list[Block]) -> list[Any]:
    """``blocks`` as pytest parameters, those of the pages not in :data:`FAST_PAGES` marked
    ``slow``."""
    return [b if b.page in FAST_PAGES else pytest.param(b, marks=pytest.mark.slow) for b in blocks]


#: datasets seqlab generates itself (no files)
GENERATED = {"dates", "sine"}


def hook() -> ModuleType:
    """``docs/_hooks/notebooks.py``, the tutorials' runner: its ``smoke_args`` and ``with_args``."""
    return docs_hook("notebooks")


# ------------------------------------------------------------------------------- the blocks
@dataclass
class Block:
    """A fenced shell or Python block of a page and the smoke comments right before it."""

    page: str  # relative to ROOT
    line: int  # the page's line of the block's first line
    lang: str
    code: str
    directives: list[tuple[str, str]]
    creates: set[str] = field(default_factory=set)  # run directories it writes
    fixtures: set[str] = field(default_factory=set)  # run directories of RUNS it reads
    datasets: set[str] = field(default_factory=set)  # real datasets it needs
    after: set[str] = field(default_factory=set)  # the earlier blocks whose runs it reads
    covered_by: str | None = None  # a block of another page that runs all its commands

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    def all(self, name: str) -> list[str]:
        return [value for key, value in self.directives if key == name]

    def one(self, name: str) -> str | None:
        found = self.all(name)
        if len(found) > 1:
            raise ValueError(f"{self.id}: two <!-- {name}: ... --> comments")
        return found[0] if found else None

    @property
    def skip(self) -> str | None:
        return self.one("smoke-skip")

    def runnable(self) -> str:
        """The code that runs: a console block's commands, a ``>>>`` block's statements."""
        if self.lang == "console":
            return console_to_script(self.code)
        if self.lang in PYTHON and self.code.lstrip().startswith(">>>"):
            return doctest_to_script(self.code)
        return self.code

    def command_at(self, line: int) -> str:
        """The command (continuation lines joined) of the block that holds the page's ``line``."""
        lines = self.code.split("\n")
        i = min(max(line - self.line, 0), len(lines) - 1)
        start = i
        while start > 0 and lines[start - 1].rstrip().endswith("\\"):
            start -= 1
        end = i
        while end < len(lines) - 1 and lines[end].rstrip().endswith("\\"):
            end += 1
        return f"{self.page}:{self.line + start}: " + "\n".join(lines[start : end + 1])


def documents() -> list[Path]:
    """README.md and the docs site's pages, but the tutorials (docs/_hooks holds no page)."""
    pages = sorted(p for p in DOCS.rglob("*.md") if not {"_hooks", "tutorials"} & set(p.parts))
    return [ROOT / "README.md", *pages]


def blocks_of(path: Path) -> tuple[list[Block], dict[str, str]]:
    """The shell and Python blocks of the page ``path``, and the files its YAML blocks write."""
    text = path.read_text(encoding="utf-8")
    page = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    blocks, files = [], {}
    for match in FENCE.finditer(text):
        lang, code = match.group(1).lower(), match.group(2)
        fence = text.count("\n", 0, match.start()) + 1
        if lang in ("yaml", "yml"):
            first = code.split("\n", 1)[0]
            named = re.fullmatch(r"#\s*([\w.-]+\.ya?ml)\s*", first)
            if named:
                files[named.group(1)] = code
            continue
        if lang not in SHELL | PYTHON:
            continue
        lines = text.split("\n")
        comments = []
        n = fence - 2  # the line right before the fence, 0-based
        while n >= 0 and lines[n].startswith("<!--"):
            comments.insert(0, lines[n])
            n -= 1
        directives = []
        for comment in comments:
            found = DIRECTIVE.match(comment)
            if found is None or found.group(1) == "smoke":  # read by the tutorials' runner
                continue
            if found.group(1) not in DIRECTIVES:
                raise ValueError(f"{page}:{fence - 1}: unknown comment <!-- {found.group(1)}: -->")
            directives.append((found.group(1), found.group(2)))
        smoke = hook().smoke_args("\n".join(comments))
        if smoke is not None:
            directives.append(("smoke", smoke))
        blocks.append(Block(page, fence + 1, lang, code.rstrip("\n"), directives))
    analyse(blocks)
    return blocks, files


@functools.cache
def dataset_of_config(path: str) -> str | None:
    """``data.dataset`` of a config under configs/ (None for other files)."""
    file = ROOT / path
    if not path.startswith("configs/") or not file.is_file():
        return None
    return (yaml.safe_load(file.read_text(encoding="utf-8")).get("data") or {}).get("dataset")


def datasets_in(code: str) -> set[str]:
    """The real datasets (files, not generated, not the user's) that ``code`` names: its
    configs' datasets (or the ``data.dataset=`` override of the same line) and ``seqlab data
    fetch|stats NAME``. FSDD and EmoDB count: ``seqlab data fetch`` finds or downloads their folders."""
    from seqlab import catalog

    found = set(FETCH.findall(code))
    for line in code.replace("\\\n", " ").split("\n"):
        override = DATASET_OVERRIDE.search(line)
        for config in CONFIG.findall(line):
            found.add(override.group(1) if override else dataset_of_config(config))
        for name in PACKAGED.findall(line):
            if not name.endswith((".yaml", ".yml")):
                pattern = re.sub(r"\$\{?\w+\}?", "*", name)
                for file in sorted((ROOT / "configs").glob(f"{pattern}.yaml")):
                    found.add(
                        override.group(1) if override else dataset_of_config(f"configs/{file.name}")
                    )
    known = catalog.datasets()
    return {n for n in found if n in known and not known[n].needs_path and n not in GENERATED}


def analyse(blocks: list[Block]) -> None:
    """Each block's runs (written, or read from RUNS) and real datasets, in page order: a block
    that reads a run an earlier block wrote needs that block's datasets too."""
    made: dict[str, tuple[str, set[str]]] = {}  # run → the block that trains it, its datasets
    serving: tuple[str, set[str]] | None = None  # the block that left a server running
    for block in blocks:
        if block.skip is not None:
            continue
        code = block.runnable()
        block.datasets = datasets_in(code)
        if re.search(r"\bcurl\s", code) and serving:
            block.datasets |= serving[1]
            block.after.add(serving[0])
        block.creates = set(CREATED.findall(code))
        for run in RUN.findall(code):
            if run in made:
                block.datasets |= made[run][1]
                block.after.add(made[run][0])
            elif run in block.creates:
                continue
            elif run in RUNS:
                block.fixtures.add(run)
                block.datasets |= datasets_in(RUNS[run])
            else:
                raise ValueError(
                    f"{block.id} reads {run}: no earlier block of the page writes it and "
                    "tests/doc_blocks.py RUNS does not train it"
                )
        for run in block.creates:
            made[run] = (block.id, block.datasets)
        if re.search(r"\bseqlab\s+serve\s[^#\n]*&", code.replace("\\\n", " ")):
            serving = (block.id, set(block.datasets))


# ------------------------------------------------------------------------------- rewriting
def _logical(text: str) -> list[str]:
    """``text``'s lines, a command continued with ``\\`` as one (its line breaks kept as \\0)."""
    return text.replace("\\\n", "\\\x00").split("\n")


def _physical(lines: list[str]) -> str:
    return "\n".join(lines).replace("\\\x00", "\\\n")


def _split_comment(line: str) -> tuple[str, str]:
    code, hash_, comment = line.partition(" #")
    return code, hash_ + comment


def _command(line: str) -> tuple[str, bool, str]:
    """A line's command (no ``&``), whether it ends with ``&``, and what follows (spaces, a
    comment)."""
    body, comment = _split_comment(line)
    code = body.rstrip()
    tail = body[len(code) :] + comment
    background = code.endswith("&")
    return code.removesuffix("&").rstrip(), background, tail


def console_to_script(code: str) -> str:
    """A ``console`` block's commands (``$ `` lines and their continuations); the lines they
    print become empty lines, so that each command keeps its line."""
    out, continued = [], False
    for line in code.split("\n"):
        if line.startswith("$ ") or continued:
            out.append(line[2:] if line.startswith("$ ") and not continued else line)
            continued = line.rstrip().endswith("\\")
        else:
            out.append("")
    return "\n".join(out)


def doctest_to_script(code: str) -> str:
    """A ``>>>`` block's code (``>>> `` and ``... `` lines); its printed values become empty
    lines, so that each statement keeps its line."""
    out, in_code = [], False
    for line in code.split("\n"):
        if line.startswith(">>>"):
            out.append(line[4:])
            in_code = True
        elif in_code and line.startswith("..."):
            out.append(line[4:])
        else:
            out.append("")
            in_code = False
    return "\n".join(out)


def substitute(block: Block, code: str) -> str:
    for rule in block.all("smoke-sub"):
        old, arrow, new = rule.partition(" => ")
        if not arrow or old not in code:
            raise ValueError(f"{block.id}: <!-- smoke-sub: {rule} -->: no {old!r} in the block")
        code = code.replace(old, new)
    return code


def with_train_args(code: str, args: str) -> str:
    """``code`` with ``args`` after the ``key=value`` overrides of each ``seqlab train CONFIG``
    (before its first option; a later value of a key wins), not in ``--resume`` commands."""
    out = []
    for line in _logical(code):
        body, comment = _split_comment(line)
        start = TRAIN.search(body)
        if start and "--resume" not in body[start.end() :]:
            option = re.search(r"\s--[a-z]", body[start.end() :])
            at = start.end() + option.start() if option else len(body.rstrip().rstrip("&"))
            head = re.sub(r"(\s|\\\x00)+$", "", body[:at])  # before a line's continuation
            body = f"{head} {args}{body[len(head) :]}"
        out.append(body + comment)
    return _physical(out)


def with_port(code: str, documented: str, port: int) -> str:
    """Port ``documented`` becomes ``port``; a ``seqlab serve`` without ``--port`` gets it."""
    code = re.sub(rf"(?<=:){documented}\b", str(port), code)
    code = re.sub(rf"(--port[ =]){documented}\b", rf"\g<1>{port}", code)
    out = []
    for line in _logical(code):
        command, background, tail = _command(line)
        if re.match(r"\s*seqlab\s+serve\s", command) and "--port" not in command:
            line = f"{command} --port {port}{' &' if background else ''}{tail}"
        out.append(line)
    return _physical(out)


def with_servers(code: str) -> str:
    """Each ``seqlab serve`` becomes the prelude's ``smoke_serve`` (in the background, waited
    for) or ``smoke_serve_fg`` (also stopped once it answers, as Ctrl-C would)."""
    out = []
    for line in _logical(code):
        command, background, tail = _command(line)
        found = re.match(r"(\s*)seqlab\s+serve\s", command)
        if found:
            name = "smoke_serve" if background else "smoke_serve_fg"
            line = f"{found.group(1)}{name} {command[found.end() :]}{tail}"
        elif background:
            raise ValueError(f"only seqlab serve may run in the background here: {command!r}")
        out.append(line)
    return _physical(out)


PRELUDE = textwrap.dedent(
    r"""
    # tests/doc_blocks.py: the harness's part of each shell block (the block starts below)
    smoke_failed() {  # the block's line that failed (where the outermost function was called)
        printf "%s\t%s\n" "${BASH_LINENO[-2]}" "$1" >>"$SMOKE_DIR/failed"
    }
    set -E
    trap 'smoke_failed "$BASH_COMMAND"' ERR
    curl() { command curl --fail-with-body --max-time 120 "$@"; }
    smoke_serve() {  # seqlab serve "$@" in the background, until its /health answers
        local port=8000 previous= arg pid
        for arg in "$@"; do
            [[ $previous == --port ]] && port=$arg
            [[ $arg == --port=* ]] && port=${arg#--port=}
            previous=$arg
        done
        seqlab serve "$@" >>"$SMOKE_DIR/serve.log" 2>&1 &
        pid=$!
        echo "$pid" >>"$SMOKE_DIR/servers"
        SMOKE_SERVER=$pid
        for _ in $(seq 1200); do
            if ! kill -0 "$pid" 2>/dev/null; then
                echo "seqlab serve $* exited:" >&2; cat "$SMOKE_DIR/serve.log" >&2; return 1
            fi
            command curl -sf --max-time 2 "http://127.0.0.1:$port/health" >/dev/null && return 0
            sleep 0.1
        done
        echo "seqlab serve $* did not answer in 120 s:" >&2; cat "$SMOKE_DIR/serve.log" >&2
        return 1
    }
    smoke_serve_fg() {  # the same, then stopped (SIGTERM: a background job ignores SIGINT)
        smoke_serve "$@" || return 1
        kill -TERM "$SMOKE_SERVER"
        wait "$SMOKE_SERVER" || { echo "seqlab serve $* exited $? on SIGTERM:" >&2;
                                  cat "$SMOKE_DIR/serve.log" >&2; return 1; }
    }
    """
).lstrip()

RUNNER = textwrap.dedent(
    """
    # tests/doc_blocks.py: runs a Python block as its page's lines (sys.argv: script, page,
    # ARGS of <!-- smoke: -->, ARGS of <!-- smoke-train: -->)
    import shlex, sys

    script, page, every, train = sys.argv[1:5]

    def main(argv=None):  # seqlab.cli.main, with the smoke ARGS; a failure raises
        argv = list(argv)
        if train and argv[:1] == ["train"] and "--resume" not in argv:
            options = [i for i, a in enumerate(argv) if a.startswith("--")]
            at = options[0] if options else len(argv)
            argv[at:at] = shlex.split(train)
        argv += shlex.split(every)
        code = real(argv)
        if code:
            raise RuntimeError(f"seqlab {shlex.join(argv)} exited {code}")
        return code

    import seqlab.cli

    real, seqlab.cli.main = seqlab.cli.main, main
    source = open(script, encoding="utf-8").read()
    exec(compile(source, page, "exec"), {"__name__": "__main__"})
    """
).lstrip()


# ------------------------------------------------------------------------------- running
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def data_dir() -> str | None:
    return os.environ.get("SEQLAB_DATA_DIR") or None


class BlockFailed(AssertionError):
    pass


@dataclass
class Page:
    """A page's sandbox and the state of its blocks, run in page order."""

    path: str
    blocks: list[Block]
    files: dict[str, str]
    root: Path
    runs: Runs
    done: dict[int, str] = field(default_factory=dict)  # block index → "ok", "skip: WHY", failure
    ports: dict[str, int] = field(default_factory=dict)

    @property
    def cwd(self) -> Path:
        return self.root / "main"

    @property
    def smoke_dir(self) -> Path:
        return self.root / "smoke"

    def setup(self) -> None:
        if self.cwd.exists():
            return
        self.cwd.mkdir(parents=True)
        self.smoke_dir.mkdir()
        (self.cwd / "configs").symlink_to(ROOT / "configs")
        if data_dir():
            (self.root / "shared").mkdir()
            (self.root / "shared" / "data").symlink_to(Path(data_dir()).resolve())
        for name, text in {**FILES, **self.files}.items():
            (self.cwd / name).write_text(text, encoding="utf-8")
        (self.smoke_dir / "prelude.sh").write_text(PRELUDE, encoding="utf-8")
        (self.smoke_dir / "runner.py").write_text(RUNNER, encoding="utf-8")

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SEQLAB_", "PYTEST"))}
        env.update(
            PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            OMP_NUM_THREADS="1",
            SEQLAB_OFFLINE="1",
            SEQLAB_NATIVE_BF16="0",
            SEQLAB_CACHE_DIR=str(self.root / "cache"),
            SMOKE_DIR=str(self.smoke_dir),
            PET_MASTER_PORT=str(free_port()),  # torchrun's rendezvous, not the usual 29500
            MPLBACKEND="Agg",
        )
        if data_dir():
            env["SEQLAB_DATA_DIR"] = str(Path(data_dir()).resolve())
        return env

    def run_through(self, index: int) -> str:
        """Run the page's blocks up to ``index`` that have not run; what happened to block
        ``index``: "ok" or "skip: REASON"; raise if it failed, or if a block whose runs or
        server it uses failed."""
        for i in range(index + 1):
            if i not in self.done:
                self.done[i] = self._attempt(self.blocks[i])
                if i == len(self.blocks) - 1:
                    self.stop_servers()
        if self.done[index] != "ok" and not self.done[index].startswith("skip: "):
            raise BlockFailed(self.done[index])
        return self.done[index]

    def _attempt(self, block: Block) -> str:
        for earlier in sorted(block.after):
            done = next(self.done[i] for i, b in enumerate(self.blocks) if b.id == earlier)
            if done.startswith("skip: "):
                return f"skip: it needs {earlier}, which did not run"
            if done != "ok":
                return f"{block.id} needs {earlier}, which failed:\n{done}"
        try:
            return self._run(block)
        except BlockFailed as failed:
            return str(failed)

    def _run(self, block: Block) -> str:
        if block.skip is not None:
            return f"skip: {block.skip}"
        missing = sorted(block.datasets) if not data_dir() else []
        if missing:
            return f"skip: needs the datasets {', '.join(missing)} (set SEQLAB_DATA_DIR)"
        if block.covered_by:
            return f"skip: its commands run in {block.covered_by}"
        self.setup()
        for run in sorted(block.fixtures):
            target = self.cwd / run
            if not target.exists():
                shutil.copytree(self.runs[run], target)
        if block.lang in PYTHON:
            self._python(block)
        else:
            self._shell(block)
        return "ok"

    def _shell(self, block: Block) -> None:
        code = substitute(block, block.runnable())
        if block.one("smoke"):
            code = hook().with_args(code, block.one("smoke"))
        if block.one("smoke-train"):
            code = with_train_args(code, block.one("smoke-train"))
        documented = block.one("smoke-port")
        if documented:
            port = self.ports.setdefault(documented, free_port())
            code = with_port(code, documented, port)
        elif re.search(r"\bseqlab\s+serve\s|\bcurl\s", code):
            raise BlockFailed(
                f"{block.id}: a block that serves or calls a server needs "
                "<!-- smoke-port: PORT --> (the port it names, 8000 by default)"
            )
        code = with_servers(code)
        script = self.smoke_dir / f"{block.line}.sh"
        padding = "\n" * (block.line - 2)
        script.write_text(f'source "$SMOKE_DIR/prelude.sh"\n{padding}{code}\n', encoding="utf-8")
        failed = self.smoke_dir / "failed"
        failed.unlink(missing_ok=True)
        done = self._subprocess(["bash", "-euo", "pipefail", str(script)], block)
        if done.returncode:
            where = f"{block.id}: the block"
            if failed.exists():
                line, _, ran = failed.read_text().split("\n")[0].partition("\t")
                if line.isdigit() and int(line) >= block.line:
                    where = block.command_at(int(line))
                    where += f"\n(ran: {ran})" if ran.strip() else ""
            raise BlockFailed(self._message(where, done))

    def _python(self, block: Block) -> None:
        code = substitute(block, block.runnable())
        script = self.smoke_dir / f"{block.line}.py"
        script.write_text("\n" * (block.line - 1) + code + "\n", encoding="utf-8")
        argv = [sys.executable, str(self.smoke_dir / "runner.py"), str(script), block.page]
        argv += [block.one("smoke") or "", block.one("smoke-train") or ""]
        done = self._subprocess(argv, block)
        if done.returncode:
            lines = re.findall(rf'File "{re.escape(block.page)}", line (\d+)', done.stderr)
            where = block.command_at(int(lines[-1])) if lines else f"{block.id}: the block"
            raise BlockFailed(self._message(where, done))

    def _subprocess(self, argv: list[str], block: Block) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(
                argv, cwd=self.cwd, env=self.env(), capture_output=True, text=True, timeout=600
            )
        except subprocess.TimeoutExpired as late:
            raise BlockFailed(f"{block.id}: still running after {late.timeout} s") from None

    def _message(self, where: str, done: subprocess.CompletedProcess) -> str:
        stdout = done.stdout.rstrip()[-2000:]
        stderr = "\n".join(done.stderr.rstrip().split("\n")[-40:])
        printed = f"the end of its output:\n{stdout}\n" if stdout else ""
        return f"{where}\nexited {done.returncode} (in {self.cwd}); {printed}its stderr:\n{stderr}"

    def stop_servers(self) -> None:
        """Stop the servers the page's blocks left running (SIGTERM, then SIGKILL)."""
        pids = self.smoke_dir / "servers"
        if not pids.exists():
            return
        for pid in {int(p) for p in pids.read_text().split()}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
                for _ in range(100):
                    if not _alive(pid):
                        break
                    time.sleep(0.1)
                else:
                    os.kill(pid, signal.SIGKILL)
        pids.unlink()


def _alive(pid: int) -> bool:
    """``pid`` runs (a zombie, which its new parent reaps, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


class Runs:
    """The run directories of :data:`RUNS`, each trained on first use (in this process)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.trained: dict[str, Path | str] = {}  # the run's folder, or why it failed

    def __getitem__(self, run: str) -> Path:
        if run not in self.trained:
            try:
                self.trained[run] = self._train(run)
            except RuntimeError as failed:
                self.trained[run] = str(failed)
        if isinstance(self.trained[run], str):
            raise BlockFailed(f"{run} (tests/doc_blocks.py RUNS): {self.trained[run]}")
        return self.trained[run]

    def _train(self, run: str) -> Path:
        from seqlab.cli import main

        folder = self.root / run.replace("/", "-")
        folder.mkdir(parents=True)
        (folder / "configs").symlink_to(ROOT / "configs")
        files = dict(FILES)
        if run in RUN_PAGES:
            files.update(blocks_of(ROOT / RUN_PAGES[run])[1])
        for name, text in files.items():
            (folder / name).write_text(text, encoding="utf-8")
        argv = [*shlex.split(RUNS[run])[1:], "--out", run]
        import torch

        out, formatwarning, threads = io.StringIO(), warnings.formatwarning, torch.get_num_threads()
        try:
            with (
                contextlib.chdir(folder),
                contextlib.redirect_stdout(out),
                contextlib.redirect_stderr(out),
                warnings.catch_warnings(),
            ):
                code = main(argv)
        finally:  # what main() sets for a process of its own
            warnings.formatwarning = formatwarning
            torch.set_num_threads(threads)
        if code:
            raise RuntimeError(f"{shlex.join(['seqlab', *argv])} exited {code}:\n{out.getvalue()}")
        return folder / run


def commands(block: Block) -> set[str]:
    """The block's commands, as written (comments dropped)."""
    lines = (_split_comment(line)[0].strip() for line in _logical(block.runnable()))
    return {line for line in lines if line}


def mark_duplicates(blocks: list[Block]) -> None:
    """A block that reads no run of an earlier block, whose commands all run, with the same smoke
    comments and runs of :data:`RUNS`, in such a block of another page, is not run twice
    (``covered_by``): the README's blocks are the home page's."""

    def alike(block: Block, other: Block) -> bool:
        return (
            block.skip is None
            and other.skip is None
            and not block.after | other.after
            and block.fixtures == other.fixtures
            and sorted(block.directives) == sorted(other.directives)
        )

    needed = {earlier for block in blocks for earlier in block.after}
    for i, block in enumerate(blocks):
        for j, other in enumerate(blocks):
            if block.id in needed or other.page == block.page or other.covered_by:
                continue
            if not alike(block, other):
                continue
            mine, theirs = commands(block), commands(other)
            if mine < theirs or (mine == theirs and j < i):
                block.covered_by = other.id
                break


@functools.cache
def all_blocks() -> tuple[Block, ...]:
    """Every block of every page, read once: the tests and the fixture share these objects."""
    found = [block for path in documents() for block in blocks_of(path)[0]]
    mark_duplicates(found)
    return tuple(found)


_RUNS: list[Runs] = []


def session_runs(tmp_path_factory) -> Runs:
    """One :class:`Runs` for the test session (both test files train each run once)."""
    if not _RUNS:
        _RUNS.append(Runs(tmp_path_factory.mktemp("doc-runs")))
    return _RUNS[0]


class Pages:
    """Each page's :class:`Page`, made on first use under ``root``; :meth:`close` stops the
    servers its blocks left running."""

    def __init__(self, blocks: list[Block], root: Path, runs: Runs) -> None:
        self.blocks, self.root, self.runs, self.made = blocks, root, runs, {}

    def run(self, block: Block) -> str:
        """Run ``block`` (and the blocks of its page before it); "ok" or "skip: REASON"."""
        if block.page not in self.made:
            blocks = [b for b in self.blocks if b.page == block.page]
            files = blocks_of(ROOT / block.page)[1]
            root = self.root / block.page.replace("/", "-")
            self.made[block.page] = Page(block.page, blocks, files, root, self.runs)
        page = self.made[block.page]
        return page.run_through(next(i for i, b in enumerate(page.blocks) if b is block))

    def close(self) -> None:
        for page in self.made.values():
            page.stop_servers()


# ------------------------------------------------------------------------ for the test files
@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """Every page's sandbox, its tiny runs and servers, for one test module (closed after it)."""
    made = Pages(all_blocks(), tmp_path_factory.mktemp("doc-pages"), session_runs(tmp_path_factory))
    yield made
    made.close()


def run_or_skip(block: Block, pages: Pages) -> None:
    """Run ``block``; a block that cannot run here (its reason on the page) is a skip."""
    done = pages.run(block)
    if done != "ok":
        pytest.skip(f"{block.id}: {done.removeprefix('skip: ')}")
