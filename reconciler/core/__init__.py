"""The pure core, in layers (each imports only the ones below it; ``.importlinter``):

``views`` > ``planning`` > ``transitions`` > ``compiling`` > ``steering`` > ``model``.

No I/O, no threads, no client libraries: every function here is a function of plain data, so
the whole core is tested with in-memory values (``tests/unit/core``)."""
