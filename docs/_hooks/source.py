"""The real code on the page: a page names an object of ``src/``, the build includes its lines.

A line of a page (alone, outside code, indented or not)

    <!-- source: seqlab.nn.cells.GRUCell.step -->

becomes, when the site is built, the object's source lines as a highlighted block titled with the
file's path and line numbers, followed by a link to the whole file (a page of the site, generated
at build time under ``source/``, so that it works offline and from ``file://``) and, for a public
object, to its entry in the API reference. The lines are read from ``src/`` when the site is
built, so they cannot drift from the code; an object that no longer exists (renamed, moved,
removed) fails the build, naming the page and the name. In Jupyter the directive is an HTML
comment in a Markdown cell: it shows nothing and runs nothing.

Objects are found by griffe (mkdocstrings' own loader) reading the source files, without importing
seqlab or torch. A method a class inherits resolves to the class that defines it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
DOCS = ROOT / "docs"
#: ``<!-- source: NAME -->`` alone on a line
DIRECTIVE = re.compile(r"^([ \t]*)<!--\s*source:\s*(\S+?)\s*-->[ \t]*$", re.M)
FENCE = re.compile(r"^[ \t]*```.*?^[ \t]*```[ \t]*$", re.M | re.S)
#: the reference pages that document modules (``::: seqlab.x.y`` lines)
REFERENCE_PAGES = ("reference/python.md", "reference/python-models.md", "reference/python-nn.md")
#: where the whole files go on the site
SOURCE_DIR = "source"


class SourceError(Exception):
    """A directive that names no object of ``src/``."""


class Snippet(NamedTuple):
    """An object's lines: ``path`` (from the repository root), first and last line (1-based)."""

    name: str  # the path of the object that defines the lines (an inherited method: its class's)
    path: str
    start: int
    end: int
    text: str
    anchor: str  # the deepest enclosing object the API reference shows (public, with a docstring)


@functools.cache
def package() -> Any:
    import griffe

    return griffe.load("seqlab", search_paths=[str(SRC)], allow_inspection=False)


def resolve(name: str) -> Snippet:
    """The lines of the object ``name`` (``seqlab.nn.cells.GRUCell.step``); :class:`SourceError`
    when ``src/`` holds no such object."""
    if not name.startswith("seqlab."):
        raise SourceError(f"{name!r}: expected a dotted name under seqlab, e.g. seqlab.nn.rnn.RNN")
    try:
        named = package()[name.removeprefix("seqlab.")]
        obj = named.final_target if named.is_alias else named
    except Exception as exc:  # griffe raises KeyError or an alias resolution error
        raise SourceError(
            f"{name!r}: no such object in src/ ({type(exc).__name__}: {exc})"
        ) from None
    if obj.filepath is None or obj.lineno is None or obj.endlineno is None:
        raise SourceError(f"{name!r}: {obj.kind.value} without source lines")
    start = min([obj.lineno, *(d.lineno for d in getattr(obj, "decorators", []))])
    if obj.kind.value == "module":
        start = 1
    lines = Path(obj.filepath).read_text(encoding="utf-8").splitlines()
    end = len(lines) if obj.kind.value == "module" else obj.endlineno
    return Snippet(
        name=obj.path,
        path=Path(obj.filepath).resolve().relative_to(ROOT).as_posix(),
        start=start,
        end=end,
        text="\n".join(lines[start - 1 : end]),
        anchor=shown_in_reference(named),
    )


def shown_in_reference(obj: Any) -> str:
    """The path of the deepest object from ``obj``'s module down to ``obj`` (as named: a name
    re-exported by a package stays the package's) that mkdocstrings shows: ``filters: ["!^_"]``
    leaves out private names, and members without a docstring or inherited are left out too."""
    chain = []
    while obj is not None and obj.kind.value != "module":
        chain.append(obj)
        obj = obj.parent
    shown = obj.path if obj is not None else ""
    for member in reversed(chain):
        if member.name.startswith("_") or member.docstring is None or member.inherited:
            break
        shown = member.path
    return shown


@functools.cache
def documented_modules() -> dict[str, str]:
    """Module or object documented in the API reference → its page (the pages' ``:::`` lines)."""
    found = {}
    for page in REFERENCE_PAGES:
        for module in re.findall(r"^:::\s*(\S+)", (DOCS / page).read_text(encoding="utf-8"), re.M):
            found[module] = page
    return found


def source_page(path: str) -> str:
    """Where the whole file ``src/seqlab/nn/cells.py`` is on the site: ``source/…/cells.md``."""
    return f"{SOURCE_DIR}/{Path(path).relative_to('src').with_suffix('.md').as_posix()}"


def relative(target: str, page_uri: str) -> str:
    return os.path.relpath(target, os.path.dirname(page_uri) or ".").replace(os.sep, "/")


def render(snippet: Snippet, page_uri: str, indent: str = "") -> str:
    """The Markdown that replaces a directive on the page ``page_uri`` (path under docs/)."""
    title = f"{snippet.path}, lines {snippet.start}–{snippet.end}"
    links = [f"[the whole file]({relative(source_page(snippet.path), page_uri)})"]
    module = next(
        (
            m
            for m in sorted(documented_modules(), key=len, reverse=True)
            if snippet.anchor == m or snippet.anchor.startswith(m + ".")
        ),
        None,
    )
    if module:
        page = relative(documented_modules()[module], page_uri)
        if snippet.anchor != module:
            page += f"#{snippet.anchor}"
        links.append(f"[`{snippet.anchor}` in the API reference]({page})")
    fence = "`" * max(3, 1 + max(map(len, re.findall("`+", snippet.text)), default=0))
    block = [
        f'{fence}python linenums="{snippet.start}" title="{title}"',
        *snippet.text.splitlines(),
        fence,
        "",
        f"<small>`{snippet.name}`: {' · '.join(links)}</small>",
    ]
    return "\n".join((indent + line) if line else "" for line in block)


def expand(markdown: str, page_uri: str) -> str:
    """``markdown`` with every directive outside code replaced by its lines; :class:`SourceError`
    naming the page and the directive for a name that ``src/`` does not hold."""
    parts = re.split(f"({FENCE.pattern})", markdown, flags=FENCE.flags)
    for i in range(0, len(parts), 2):

        def include(match: re.Match) -> str:
            try:
                return render(resolve(match.group(2)), page_uri, match.group(1))
            except SourceError as exc:
                raise SourceError(f"{page_uri}: <!-- source: {match.group(2)} -->: {exc}") from None

        parts[i] = DIRECTIVE.sub(include, parts[i])
    return "".join(parts)


def names(markdown: str) -> list[str]:
    """The names the directives of ``markdown`` include (outside code)."""
    text = FENCE.sub("", markdown)
    return [m.group(2) for m in DIRECTIVE.finditer(text)]


def whole_file(path: str) -> str:
    """The generated page showing ``src/…`` whole, numbered."""
    text = (ROOT / path).read_text(encoding="utf-8").rstrip("\n")
    return "\n".join(
        [
            "---",
            "search:",
            "  exclude: true",
            "---",
            "",
            f"# {path}",
            "",
            "The file as the site was built from it; the tutorials include its lines by name.",
            "",
            f'```python linenums="1" title="{path}"',
            text,
            "```",
            "",
        ]
    )


# --------------------------------------------------------------------------------- the hook
def on_files(files: Any, config: Any) -> Any:
    """mkdocs: a page under ``source/`` for each file a directive includes from."""
    from mkdocs.structure.files import File, InclusionLevel

    paths = set()
    for page in DOCS.rglob("*.md"):
        if "_hooks" in page.parts:
            continue
        for name in names(page.read_text(encoding="utf-8")):
            with contextlib.suppress(SourceError):  # on_page_markdown fails, naming the page
                paths.add(resolve(name).path)
    for path in sorted(paths):
        files.append(
            File.generated(
                config,
                source_page(path),
                content=whole_file(path),
                inclusion=InclusionLevel.NOT_IN_NAV,
            )
        )
    return files


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    from mkdocs.exceptions import PluginError

    try:
        return expand(markdown, page.file.src_uri)
    except SourceError as exc:
        raise PluginError(str(exc)) from None
