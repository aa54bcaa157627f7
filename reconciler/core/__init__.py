"""The pure core: the manifest model, the observed world, compile, diff, plan.

No I/O, no threads, no client libraries: every function here is a function of plain data, so
the whole core is tested with in-memory values (``tests/unit/core``)."""
