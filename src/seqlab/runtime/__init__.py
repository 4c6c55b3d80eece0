"""How seqlab runs on a machine: the numeric precision the hardware runs natively
(:mod:`~seqlab.runtime.precision`), the machine a measurement ran on
(:mod:`~seqlab.runtime.machine`), progress bars on a terminal only
(:mod:`~seqlab.runtime.progress`), and fewer page faults for large tensors
(:mod:`~seqlab.runtime.allocator`, asked for by the ``seqlab`` command)."""
