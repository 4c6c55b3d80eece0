"""What a request must be before anything reads it: a server on the developer's machine is
reachable from every page open in their browser, so a task's request must declare a JSON body
(:func:`check_json`: 415 otherwise) and no query string (:func:`check_no_query`: 422), and
every request must name this server in its ``Host``
header (:func:`host_refused`: 403 otherwise; :func:`allowed_hosts` makes the names).
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import parse_qsl

from starlette.datastructures import Headers

from seqlab.errors import SeqlabError


class UnsupportedMediaType(SeqlabError):
    """A task's request whose body is not declared UTF-8 JSON (415)."""


def check_no_query(query: bytes, route: str) -> None:
    """Refuse (422) a task's request with a query string: its options are fields of the JSON
    body, and a parameter in the URL (``?beam=99``) would otherwise be ignored unsaid."""
    if not query:
        return
    names = [name for name, _ in parse_qsl(query.decode("latin-1"), keep_blank_values=True)]
    shown = ", ".join(repr(n[:40]) for n in dict.fromkeys(names)) or repr(
        query[:40].decode("latin-1")
    )
    raise SeqlabError(
        f"POST {route} takes its options as fields of the JSON body, not in the URL's query "
        f'string (got {shown}): send them in the body, e.g. {{"beam": 5}}'
    )


def check_json(headers: Headers, route: str) -> None:
    """Refuse (415) a task's request unless its ``Content-Type`` is ``application/json``, in
    UTF-8 when a charset is named. A web page can send a ``text/plain`` body, or one with no
    type, to a server on the user's machine without asking it first (a "simple" request); one
    declared ``application/json`` makes the browser ask first (a CORS preflight), which this
    server refuses unless CORS is configured. So no page the user visits makes it work."""
    kind = headers.get("content-type")
    if kind is None:
        raise UnsupportedMediaType(
            f"POST {route} takes a JSON body: send the header Content-Type: application/json "
            "(none was sent)"
        )
    media, _, params = kind.partition(";")
    if media.strip().lower() != "application/json":
        raise UnsupportedMediaType(
            f"POST {route} takes a JSON body: send the header Content-Type: application/json "
            f"(got {media.strip()[:60]!r})"
        )
    for param in params.split(";"):
        key, _, value = param.partition("=")
        charset = value.strip().strip('"').lower()
        if key.strip().lower() == "charset" and charset not in ("utf-8", "utf8"):
            raise UnsupportedMediaType(
                f"POST {route} reads its JSON body as UTF-8, but the request says charset="
                f"{value.strip()[:30]}: encode the body as UTF-8 and send Content-Type: "
                "application/json (or application/json; charset=utf-8)"
            )


#: the names of this machine's loopback interface, which a server bound there answers to
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def allowed_hosts(bound: str, names: Sequence[str] = ()) -> frozenset[str] | None:
    """The ``Host`` names a server listening on ``bound`` answers to: the loopback names when it
    listens there, else the address itself, and the ``names`` configured (``seqlab serve
    --allowed-host``); None (any name) for every interface (``0.0.0.0``, ``::``) with none
    configured, or when ``*`` is one of them."""
    given = {n.strip().lower().strip("[]") for n in names}
    if "*" in given or (bound in ("0.0.0.0", "::", "") and not given):
        return None
    bound = bound.lower().strip("[]")
    return frozenset(given | ({*LOOPBACK} if bound in LOOPBACK else {bound}))


def host_refused(host: str | None, allowed: frozenset[str]) -> str | None:
    """Why a request with this ``Host`` header is refused (None: it is not). A page the user
    visits may point a name of its own at 127.0.0.1 (DNS rebinding) and then read this server's
    answers as its own origin's; the ``Host`` it sends is that name, not one of this server's
    (Jupyter and webpack's dev server refuse it likewise)."""
    if host is None:
        return "a request needs a Host header naming this server"
    name = host.strip().lower()
    if name.startswith("["):  # [::1]:8000
        name = name[1 : name.find("]")] if "]" in name else name
    elif name.count(":") == 1:
        name = name.partition(":")[0]
    if name in allowed:
        return None
    return (
        f"this server does not answer to the name {host[:100]!r} (its names: "
        f"{', '.join(sorted(allowed))}): a web page may have pointed that name at this machine; "
        "to serve under that name, start seqlab serve with --allowed-host NAME"
    )
