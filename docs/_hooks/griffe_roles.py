"""A Griffe extension for the docs site (``extensions:`` of mkdocstrings in ``mkdocs.yml``).

seqlab's docstrings cross-reference with Sphinx roles (``:class:`~seqlab.storage.rundir.RunDir```) and
write code as reST literals (````x````), which mkdocstrings would show as they are. This
extension rewrites them, as each object is loaded, into Markdown code spans: a role's target as
Sphinx shows it (``~`` keeps the last name only). Links are not made: a target the site does not
render would be a broken link, which fails the strict build.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):`(~?)([\w.]+)(?:\(\))?`")


def markdown(text: str) -> str:
    """``text`` with Sphinx roles and reST literals as Markdown code spans."""
    text = ROLE.sub(
        lambda m: f"`{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}`", text
    )
    text = re.sub(
        r"(?<=\S)::\n", ":\n", text
    )  # a reST literal block's "::" (the block: indented code)
    return text.replace("``", "`")


class SphinxRoles(griffe.Extension):
    """Rewrites every loaded object's docstring with :func:`markdown`."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
