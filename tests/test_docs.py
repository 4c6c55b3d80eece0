"""Docs that cannot rot: what the docs site (``docs/**/*.md``) and the README write exists.

- every ``seqlab`` command and ``--flag`` they write, in code blocks and inline code, exists in
  the real parsers (:func:`seqlab.cli.build_parser`): renaming a documented flag fails here. An
  old name the parser still accepts but hides from ``--help`` may appear in the changelog and the
  README's table of renamed options only;
- every config key they write (``train.lr``, ``model.d_model``, ``data.subword.vocab_size``, the
  keys of a YAML block) exists in the schema (:mod:`seqlab.config`, each architecture's config);
- every relative link reaches a file, or a page the docs hook generates (``mkdocs build
  --strict`` checks the site's links and anchors too, in ``make docs``);
- every test they name (``test_x.py::test_name``) exists;
- the generated reference lists every command, option, config key and route, and the site's
  navigation lists every page.

The checks read files and parsers only: no site is built here (``make docs`` builds it).
"""

from __future__ import annotations

import ast
import functools
import re
import shlex
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from conftest import docs_hook

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
HOOK = DOCS / "_hooks" / "reference.py"
CHANGELOG = DOCS / "changelog.md"
#: the README's table of renamed options: old names may be written there, as in the changelog
README_RENAMES = "### Renamed options"
#: flags of other programs that the docs name (fairseq's length penalty, torchrun's, mkdocs's)
FOREIGN_FLAGS = {
    "--lenpen",
    "--nproc_per_node",
    "--nnodes",
    "--node-rank",
    "--nproc-per-node",
    "--master-addr",
    "--master-port",
    "--strict",
}
SHELL = {"", "sh", "bash", "shell", "console"}
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
INLINE = re.compile(r"(?<!`)`([^`]+)`(?!`)")  # a span may go on past a line break
SEQLAB = re.compile(r"(?:^|(?<=[\s/]))seqlab\s+(.*)$")
FLAG = re.compile(r"^--[a-z0-9][a-z0-9-]*$")
KEY = re.compile(r"(?<![\w./-])(?:data|model|train|decode)(?:\.[a-z_][a-z0-9_]*)+(?![\w(])")
FILE_SUFFIX = {"py", "yaml", "yml", "json", "jsonl", "png", "txt", "csv", "tsv", "md", "gz"}
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted(p for p in DOCS.rglob("*.md") if "_hooks" not in p.parts)]


def hook() -> ModuleType:
    """``docs/_hooks/reference.py``, the mkdocs hook that generates the reference pages."""
    return docs_hook("reference")


Commands = dict[tuple[str, ...], tuple[set[str], set[str]]]


def cli_table(parser: Any = None) -> Commands:
    """Each command path → (its flags, its flags hidden from ``--help``), read from ``parser``
    (default: seqlab's own)."""
    found = {}
    for path, _, sub in hook().commands(parser):
        shown = hook().flags(sub)
        found[path] = (shown, hook().flags(sub, hidden=True) - shown)
    return found


@functools.cache
def cli() -> Commands:
    return cli_table()


@functools.cache
def config_keys() -> frozenset[str]:
    """Every config key and every section holding keys (``data.subword``)."""
    keys = set(hook().config_keys())
    return frozenset(keys | {k.rsplit(".", 1)[0] for k in keys if k.count(".") > 1})


# --------------------------------------------------------------------------------- the checker
def code_of(text: str) -> tuple[list[tuple[str, str]], list[str], str]:
    """(language, body) of each fenced block, the inline code spans, and the prose without
    the fenced blocks."""
    blocks = [(m.group(1).lower(), m.group(2)) for m in FENCE.finditer(text)]
    prose = FENCE.sub("", text)
    return blocks, [" ".join(span.split()) for span in INLINE.findall(prose)], prose


def _strip_comment(line: str) -> str:
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def shell_lines(body: str) -> list[str]:
    """The commands of a shell block: continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", body)
    return [_strip_comment(line) for line in joined.splitlines()]


def _tokens(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:  # an unbalanced quote in an excerpt: words are enough here
        return text.split()


def _flag(token: str) -> str | None:
    token = token.strip("[](),.;").split("=", 1)[0]
    return token if FLAG.match(token) else None


def _is_placeholder(token: str) -> bool:
    return token.isupper() and token.replace("_", "").isalpha()


def check_command(
    text: str, in_changelog: bool, commands: Commands, keys: frozenset[str]
) -> list[str]:
    """Problems with one ``seqlab …`` command line (``text`` is what follows ``seqlab``)."""
    problems: list[str] = []
    tokens = _tokens(text)
    path, i = ("seqlab",), 0
    # the command: as deep as the words name subcommands; a placeholder (``seqlab demo NAME``)
    # stands for any of them, whose flags then all count
    scope = [path]
    while i < len(tokens):
        children = [p for p in commands if p[:-1] == path and len(p) == len(path) + 1]
        if not children:
            break
        word = tokens[i]
        if (*path, word) in commands:
            path, scope, i = (*path, word), [(*path, word)], i + 1
        elif _is_placeholder(word):
            scope, i = children, i + 1
            break
        else:
            if len(path) == 1 and not word.startswith("-"):
                problems.append(f"`seqlab {word}`: no such command")
                return problems
            break
    rest = tokens[i:]
    for n, token in enumerate(rest):
        if token in ("<", ">", "&&", ";", "||", "2>&1"):
            break
        if token == "|":  # an alternative (``data list | fetch NAME``), else a pipe
            sibling = (*path[:-1], rest[n + 1]) if n + 1 < len(rest) else None
            if sibling not in commands:
                break
            path = sibling
            scope = [path]
            continue
        if "=" in token and not token.startswith("-") and KEY.match(token.split("=", 1)[0]):
            problems += check_keys(token.split("=", 1)[0], keys)
            continue
        flag = _flag(token)
        if flag is None:
            continue
        shown = set().union(*(commands[p][0] for p in scope))
        hidden = set().union(*(commands[p][1] for p in scope))
        name = "seqlab " + " ".join(scope[0][1:] if len(scope) == 1 else path[1:])
        if flag in hidden and not in_changelog:
            problems.append(f"`{name} {flag}`: an old name, kept working but not to be documented")
        elif flag not in shown | hidden:
            problems.append(f"`{name} {flag}`: no such option")
    return problems


def check_keys(text: str, keys: frozenset[str]) -> list[str]:
    """Problems with the config keys written in ``text`` (``keys``: the ones that exist)."""
    problems = []
    for match in KEY.finditer(text):
        key = match.group(0)
        if key.rsplit(".", 1)[-1] in FILE_SUFFIX:
            continue
        if key not in keys:
            problems.append(f"config key `{key}` does not exist")
    return problems


def check_yaml(body: str, keys: frozenset[str]) -> list[str]:
    """Problems with the keys of a YAML config block."""
    try:
        raw = yaml.safe_load(body)
    except yaml.YAMLError:
        return ["a YAML block does not parse"]
    if not isinstance(raw, dict):
        return []
    written = []
    for section in ("data", "model", "train", "decode"):
        for key, value in (raw.get(section) or {}).items():
            written.append(f"{section}.{key}")
            if isinstance(value, dict):
                written += [f"{section}.{key}.{sub}" for sub in value]
    return check_keys(" ".join(written), keys)


def check_flag(flag: str, in_changelog: bool, commands: Commands) -> list[str]:
    """Problems with a flag written alone (``--beam 1``): some command must have it."""
    shown = set().union(*(c[0] for c in commands.values()))
    hidden = set().union(*(c[1] for c in commands.values()))
    if flag in FOREIGN_FLAGS or flag in shown or (flag in hidden and in_changelog):
        return []
    return [f"`{flag}`: no seqlab command has this option"]


def _renames_table(text: str, path: Path) -> tuple[str, str]:
    """(the rest, the README's table of renamed options): of the README only, else (text, "")."""
    if path != ROOT / "README.md" or README_RENAMES not in text:
        return text, ""
    head, heading, rest = text.partition(README_RENAMES)
    end = re.search(r"^#", rest, re.M)
    cut = end.start() if end else len(rest)
    return head + rest[cut:], heading + rest[:cut]


def problems_in(
    text: str, path: Path, commands: Commands | None = None, keys: frozenset[str] | None = None
) -> list[str]:
    """Every command, flag and config key of a Markdown text that does not exist (in
    ``commands`` and ``keys``, default: seqlab's)."""
    commands = cli() if commands is None else commands
    keys = config_keys() if keys is None else keys
    in_changelog = path == CHANGELOG
    text, renames = _renames_table(text, path)
    found = problems_in(renames, CHANGELOG, commands, keys) if renames else []
    blocks, spans, _ = code_of(text)
    for language, body in blocks:
        if language in SHELL:
            for line in shell_lines(body):
                match = SEQLAB.search(line)
                if match:
                    found += check_command(match.group(1), in_changelog, commands, keys)
                else:
                    found += check_keys(" ".join(t for t in _tokens(line) if "=" in t), keys)
        elif language in ("yaml", "yml"):
            found += check_yaml(body, keys)
    for span in spans:
        match = SEQLAB.search(span)
        flag = _flag(span.split()[0]) if span.startswith("--") else None
        if match:
            found += check_command(match.group(1), in_changelog, commands, keys)
        elif flag:
            found += check_flag(flag, in_changelog, commands)
        if not match:
            found += check_keys(span, keys)
    return found


def broken_links(text: str, path: Path) -> list[str]:
    """Relative links of a Markdown text that reach no file (nor a generated page)."""
    _, _, prose = code_of(text)
    # the pages the hook generates exist in the site only: the README cannot link to them
    generated = {DOCS / p for p in hook().GENERATED} if DOCS in path.parents else set()
    anchors = {hook()._anchor(p) for p in cli()}
    broken = []
    for target in LINK.findall(INLINE.sub("", prose)):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve()
        if not resolved.exists() and resolved not in generated:
            broken.append(f"{target}: no such file")
        elif resolved == DOCS / "reference" / "cli.md" and anchor and anchor not in anchors:
            broken.append(f"{target}: no such command on the generated page")
    return broken


def missing_tests(text: str) -> list[str]:
    missing = []
    for row in text.splitlines():
        current = None
        for match in re.finditer(r"`(?:(test_\w+\.py))?::(\w+)`", row):
            current = match.group(1) or current
            file = ROOT / "tests" / (current or "")
            if current is None or not file.is_file():
                missing.append(f"{current}::{match.group(2)} (no such file)")
                continue
            tree = ast.parse(file.read_text(encoding="utf-8"))
            if match.group(2) not in {
                n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
            }:
                missing.append(f"{current}::{match.group(2)}")
    return missing


# ------------------------------------------------------------------------------------ the tests
@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_flag_and_config_key_the_docs_write_exists(path):
    problems = problems_in(path.read_text(encoding="utf-8"), path)
    assert not problems, f"{path.relative_to(ROOT)}:\n" + "\n".join(problems)


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_named_test_exists(path):
    text = path.read_text(encoding="utf-8")
    problems = broken_links(text, path) + missing_tests(text)
    assert not problems, f"{path.relative_to(ROOT)}:\n" + "\n".join(problems)


def test_every_config_the_docs_show_is_valid():
    """A YAML block with data and model sections is a whole config: it validates as written
    (the files it names need not exist; they are read when training starts)."""
    from seqlab.config import config_from_dict
    from seqlab.config.files import parse_yaml

    shown = 0
    for path in documents():
        blocks, _, _ = code_of(path.read_text(encoding="utf-8"))
        for language, body in blocks:
            raw = parse_yaml(body) if language in ("yaml", "yml") else None
            if isinstance(raw, dict) and {"data", "model"} <= set(raw):
                config_from_dict(raw, str(path.relative_to(ROOT)))
                shown += 1
    assert shown >= 3  # the how-to's language model, classifier and forecaster


def test_the_checker_catches_a_renamed_flag_key_command_link_and_test():
    """What the checks exist to catch, each caught (and the same text with the real names
    passes)."""
    page = DOCS / "howto" / "page.md"
    good = (
        "```sh\nseqlab translate --run RUN --beam 5 < in.txt  # --no-such-flag\n"
        "seqlab train c.yaml train.lr=3e-4 --out RUN\nseqlab demo NAME --out DIR\n```\n"
        "`seqlab demo vit-vs-cnn --min-step-budget 600`, `--length-penalty 1.5`, `model.d_model`\n"
        "```yaml\ndata:\n  dataset: text\n  subword:\n    vocab_size: 8000\nmodel:\n  arch: rnn_lm\n```\n"
    )
    assert problems_in(good, page) == []
    renamed = problems_in("```sh\nseqlab translate --run RUN --beam-size 5\n```", page)
    assert renamed == ["`seqlab translate --beam-size`: no such option"]
    assert problems_in("`seqlab demo vit-vs-cnn --min-steps 600`", page) == [
        "`seqlab demo vit-vs-cnn --min-steps`: an old name, kept working but not to be documented"
    ]
    assert problems_in("`seqlab demo vit-vs-cnn --min-steps 600`", CHANGELOG) == []
    old = "```sh\nseqlab forecast --checkpoint RUN --steps 3\n```\n"
    assert problems_in(old, page) == [
        "`seqlab forecast --checkpoint`: an old name, kept working but not to be documented",
        "`seqlab forecast --steps`: an old name, kept working but not to be documented",
    ]
    readme, table = ROOT / "README.md", f"{README_RENAMES}\n\n| `seqlab curves --out F` |\n"
    assert problems_in(table, readme) == []  # the README's table of renamed options names them
    assert problems_in(f"{table}\n## Next\n\n`seqlab curves --out F`\n", readme) == [
        "`seqlab curves --out`: an old name, kept working but not to be documented"
    ]
    assert problems_in("`seqlab transalte --run RUN`", page) == [
        "`seqlab transalte`: no such command"
    ]
    assert problems_in("`--beams 5`", page) == ["`--beams`: no seqlab command has this option"]
    assert problems_in("`train.learning_rate=3e-4`", page) == [
        "config key `train.learning_rate` does not exist"
    ]
    assert problems_in("```yaml\ntrain:\n  lrate: 0.1\n```", page) == [
        "config key `train.lrate` does not exist"
    ]
    links = "[a](../reference/cli.md#seqlab-serve) [b](../nowhere.md) [c](../reference/cli.md#seqlab-nope)"
    assert broken_links(links, page) == [
        "../nowhere.md: no such file",
        "../reference/cli.md#seqlab-nope: no such command on the generated page",
    ]
    generated = "[cli](docs/reference/cli.md)"  # a page of the built site, not of the repository
    assert broken_links(generated, ROOT / "README.md") == ["docs/reference/cli.md: no such file"]
    assert missing_tests("| `test_docs.py::test_no_such_test` |") == [
        "test_docs.py::test_no_such_test"
    ]


def test_a_flag_or_key_renamed_in_the_code_fails_the_docs_that_write_it():
    """The mutation the checks exist for: ``--ensemble`` of ``seqlab evaluate`` renamed in a real
    parser, ``train.average_last`` renamed in the schema's keys; the pages that document them
    fail."""
    from seqlab.cli import build_parser

    parser = build_parser()
    evaluate = {name: sub for name, _, sub in hook().subcommands(parser)}["evaluate"]
    evaluate.format_help()  # the declared options are added on first use
    (action,) = [a for a in evaluate._actions if "--ensemble" in a.option_strings]
    action.option_strings = ["--ensemble-runs"]
    renamed = cli_table(parser)
    page = DOCS / "howto" / "ensembles.md"
    text = page.read_text(encoding="utf-8")
    assert problems_in(text, page) == []
    assert "`seqlab evaluate --ensemble`: no such option" in problems_in(text, page, renamed)
    keys = (config_keys() - {"train.average_last"}) | {"train.average_final"}
    page = DOCS / "howto" / "resume.md"
    text = page.read_text(encoding="utf-8")
    assert problems_in(text, page) == []
    assert "config key `train.average_last` does not exist" in problems_in(text, page, keys=keys)


def test_the_generated_reference_lists_every_command_option_key_and_route():
    pytest.importorskip("fastapi")
    reference = hook()
    page = reference.cli_reference()
    for path, (shown, _) in cli().items():
        if len(path) > 1:
            assert f"`{' '.join(path)}` {{#{reference._anchor(path)}}}" in page
        for flag in shown - {"-h", "--help"}:
            assert flag in page, (path, flag)
    config = reference.config_reference()
    for key in reference.config_keys():
        assert f"`{key}`" in config, key
    schema = reference.openapi_schema()
    http = reference.http_reference(schema)
    for route, methods in schema["paths"].items():
        for method in methods:
            assert f"`{method.upper()} {route}`" in http
    assert "TranslateRequest" in http and "`beam`" in http


def test_the_navigation_lists_every_page_and_only_pages_that_exist():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))

    def pages(node: Any) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, list):
            return [p for item in node for p in pages(item)]
        return [p for value in node.values() for p in pages(value)]

    listed = pages(config["nav"])
    on_disk = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md") if "_hooks" not in p.parts}
    generated = {p for p in hook().GENERATED if p.endswith(".md")}
    assert sorted(set(listed)) == sorted(on_disk | generated)
    assert len(listed) == len(set(listed))
