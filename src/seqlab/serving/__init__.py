"""What a task declares to be served, below the HTTP server: the contract between a task's
package and ``seqlab serve``.

- :mod:`seqlab.serving.service`: :class:`~seqlab.serving.service.Service` (route, request,
  response, handler, page panel) and the handlers' common base; each task's own lives in its
  package (``seqlab/tasks/translation/service.py``, …);
- :mod:`seqlab.serving.limits`: the named per-request limits and their one check.

These need pydantic only, no FastAPI, so a task declares its service without the ``serve`` extra
and without importing the server: the tasks sit below :mod:`seqlab.serve` (the HTTP entry point,
which reads the tasks' services), and nothing here imports a task or the server.
"""
