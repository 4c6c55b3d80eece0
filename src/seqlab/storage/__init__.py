"""What seqlab writes and reads on disk, one module per concern.

- :mod:`seqlab.storage.text`: reading the user's text files and standard input (UTF-8, strict,
  ``.gz`` allowed, one line-break rule).
- :mod:`seqlab.storage.rundir`: the run directory (its files, the one-writer lock, a new or an
  earlier run).
- :mod:`seqlab.storage.checkpoints`: checkpoints, writing and reading, with their pointers.
- :mod:`seqlab.storage.training_state`: a training run's state, one schema from the trainer
  to ``meta.json`` and back (save, read, restore).
- :mod:`seqlab.storage.outputs`: what seqlab may replace where it writes a command's output
  (single files); :mod:`seqlab.storage.output_dirs`: output folders, under that rule.

Written with :mod:`seqlab.atomic` (atomic file writes, a layer below, which the config and the
data readers use too); the config files themselves: :mod:`seqlab.config.files`.
"""
