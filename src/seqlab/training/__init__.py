"""The training loop and what it needs, none of it specific to a model or task: the trainer,
callbacks, checkpoints, optimizers and schedules, precision, data parallelism."""
