"""``seqlab serve``: trained run directories behind an HTTP API, and a page that shows what each
model does (its output, token probabilities and attention).

- :mod:`seqlab.serve.app`: the FastAPI application (:func:`create_app`, :func:`load_models`);
- :mod:`seqlab.serve.service`: what a task declares to be served (:class:`~seqlab.serve.service.Service`:
  route, request, response, handler, page panel) and the handlers' common base; each task's
  own lives in its package (``seqlab/tasks/translation/service.py``, …);
- :mod:`seqlab.serve.schemas`: the bodies every server shares (errors, ``/models``, ``/health``);
- :mod:`seqlab.serve.batching`: micro-batching on a worker thread, with a bounded queue;
- :mod:`seqlab.serve.limits`: the named per-request limits;
- ``static/``: the page's frame (HTML, JavaScript and CSS; no CDN, no build step); each task's
  panel script is its package's ``panel.js``.

Needs the ``serve`` extra: ``pip install 'seqlab[serve]'`` (FastAPI and uvicorn).
"""

from __future__ import annotations

from seqlab.serve.limits import Limits

__all__ = ["Limits", "create_app", "load_models"]


def __getattr__(name: str):  # the app (and FastAPI) only when asked for
    if name in ("create_app", "load_models"):
        from seqlab.serve import app  # deferred: fastapi

        return getattr(app, name)
    raise AttributeError(name)
