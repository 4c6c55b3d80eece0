"""``seqlab serve``: trained run directories behind an HTTP API, and a page that shows what each
model does (its output, token probabilities and attention).

- :mod:`seqlab.serve.app`: the FastAPI application (:func:`create_app`, :func:`load_models`);
- :mod:`seqlab.serve.http`: error bodies, the body-size limit, the routes' description, events;
- :mod:`seqlab.serve.schemas`: the bodies every server shares (errors, ``/models``, ``/health``);
- :mod:`seqlab.serve.batching`: micro-batching on a worker thread, with a bounded queue;
- ``static/``: the page's frame (HTML, JavaScript and CSS; no CDN, no build step); each task's
  panel script is its package's ``panel.js``.

What a task declares to be served (its :class:`~seqlab.serving.service.Service`) and the
named limits live a layer below, in :mod:`seqlab.serving`, so that the tasks never import the
server; this package is the HTTP entry point only.

Needs the ``serve`` extra: ``pip install 'seqlab[serve]'`` (FastAPI and uvicorn).
"""

from __future__ import annotations

from seqlab.serving.limits import Limits

__all__ = ["Limits", "create_app", "load_models"]


def __getattr__(name: str):  # the app (and FastAPI) only when asked for
    if name in ("create_app", "load_models"):
        from seqlab.serve import app  # deferred: fastapi

        return getattr(app, name)
    raise AttributeError(name)
