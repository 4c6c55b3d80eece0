"""TeX in the pages (``$…$``, ``$$…$$``) becomes MathML when the site is built.

Browsers draw MathML themselves, so the site needs no MathJax or KaTeX script (nothing from a CDN,
nothing to vendor); Jupyter, which opens the same tutorial pages as notebooks, renders the TeX
with its own MathJax. Code blocks and inline code are left alone; a formula latex2mathml cannot
read fails the build, naming the page, and so does a TeX command or a ``$…$`` left in a rendered
page outside code (latex2mathml copies the delimiter of ``\\Big\\lVert`` through as text, for
one; a formula split over a line break is not converted): the site would show it raw. Code
spans may run over a line break, as Markdown's do. The site ships its own math font
(``docs/assets/fonts/``, ``math.css``) so that brackets stretch on every system.
"""

from __future__ import annotations

import re

from latex2mathml.converter import convert
from mkdocs.exceptions import PluginError

#: code blocks, and code spans (which may run across a line break, not across a blank line)
CODE = re.compile(r"(^[ \t]*```.*?^[ \t]*```[ \t]*$|`(?:[^`\n]|\n(?![ \t]*\n))+`)", re.M | re.S)
DISPLAY = re.compile(r"\$\$(.+?)\$\$", re.S)
INLINE = re.compile(r"(?<![\\$\w])\$(?!\s)([^$\n]+?)(?<!\s)\$(?![\w$])")
#: delimiters latex2mathml knows alone but copies through as text after ``\big``, ``\Big``, …
DELIMITERS = {
    "lVert": "&#x02016;",
    "rVert": "&#x02016;",
    "Vert": "&#x02016;",
    "|": "&#x02016;",
    "lvert": "&#x0007C;",
    "rvert": "&#x0007C;",
    "vert": "&#x0007C;",
    "langle": "&#x027E8;",
    "rangle": "&#x027E9;",
    "lbrace": "{",
    "rbrace": "}",
    "{": "{",
    "}": "}",
    "lfloor": "&#x0230A;",
    "rfloor": "&#x0230B;",
    "lceil": "&#x02308;",
    "rceil": "&#x02309;",
}
SIZED = re.compile(
    r"(<mo [^>]*>)\\(lVert|rVert|Vert|lvert|rvert|vert|langle|rangle|lbrace|rbrace|lfloor|rfloor|lceil|rceil|\||\{|\})</mo>"
)
#: a TeX command (a backslash and letters) in a rendered page
COMMAND = re.compile(r"\\[A-Za-z]+")
#: a formula left as typed in a rendered page: ``$…$`` outside code (over line breaks too)
TYPED = re.compile(r"(?<![\\$\w])\$(?![\s$])[^$<>]+?(?<!\s)\$(?![\w$])")
#: what may hold a backslash on purpose: code, scripts, styles
VERBATIM = re.compile(r"<(pre|code|script|style|kbd|samp)\b.*?</\1>", re.S | re.I)


def _mathml(tex: str, display: bool, page: str) -> str:
    try:
        mathml = convert(tex.strip(), display="block" if display else "inline")
    except Exception as exc:  # latex2mathml raises several kinds
        raise PluginError(f"{page}: cannot convert the formula {tex.strip()!r}: {exc}") from None
    mathml = SIZED.sub(lambda m: m.group(1) + DELIMITERS[m.group(2)] + "</mo>", mathml)
    left = COMMAND.findall(mathml)
    if left:
        raise PluginError(
            f"{page}: the formula {tex.strip()!r} leaves {', '.join(sorted(set(left)))} "
            "unconverted: write it another way (\\lVert x \\rVert, \\left( … \\right))"
        )
    return mathml


def unconverted(html: str) -> list[str]:
    """The TeX commands, and the formulas left as typed (``$…$``), in a rendered page outside
    code, scripts and styles."""
    text = VERBATIM.sub("", html)
    return sorted(set(COMMAND.findall(text) + [m.group(0) for m in TYPED.finditer(text)]))


def to_mathml(markdown: str, page: str = "") -> tuple[str, dict[str, str]]:
    """``markdown`` with every formula outside code replaced by a placeholder word, and the
    MathML of each placeholder: Markdown would read a ``<math>`` tag that starts a line as a block
    of raw HTML and break the paragraph, so the MathML goes in after Markdown is done."""
    found: dict[str, str] = {}

    def hold(mathml: str, display: bool) -> str:
        key = f"seqlabmath{len(found):04d}x"
        found[key] = mathml
        return f"\n\n{key}\n\n" if display else key

    parts = CODE.split(markdown)
    for i in range(0, len(parts), 2):  # even parts are outside code
        text = DISPLAY.sub(lambda m: hold(_mathml(m.group(1), True, page), True), parts[i])
        parts[i] = INLINE.sub(lambda m: hold(_mathml(m.group(1), False, page), False), text)
    return "".join(parts), found


_FORMULAS: dict[str, dict[str, str]] = {}


def on_page_markdown(markdown: str, page, **_) -> str:
    text, _FORMULAS[page.file.src_uri] = to_mathml(markdown, page.file.src_uri)
    return text


def on_page_content(html: str, page, **_) -> str:
    for key, mathml in _FORMULAS.pop(page.file.src_uri, {}).items():
        html = html.replace(f"<p>{key}</p>", mathml).replace(key, mathml)
    left = unconverted(html)
    if left:
        raise PluginError(
            f"{page.file.src_uri}: TeX left unconverted in the rendered page: {', '.join(left)} "
            "(a formula outside $…$, or one the MathML hook could not read)"
        )
    return html
