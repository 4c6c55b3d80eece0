"""What seqlab writes and reads on disk, one module per concern.

- :mod:`seqlab.storage.atomic`: atomic file writes (temporary file, fsync, rename), never
  replacing anything but a regular file.
- :mod:`seqlab.storage.text`: reading the user's text files and standard input (UTF-8, strict,
  ``.gz`` allowed, one line-break rule).
- :mod:`seqlab.storage.rundir`: the run directory (its files, the one-writer lock, a new or an
  earlier run).
- :mod:`seqlab.storage.checkpoints`: checkpoints, writing and reading, with their pointers.
- :mod:`seqlab.storage.outputs`: what seqlab may replace where it writes a command's output.
"""
