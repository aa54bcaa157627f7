"""The planners: a full plan (``full``), the warm loop's incremental one (``incremental``), the
part of a plan one process reconciles (``slicing``), and plans for interconnect zones from one
snapshot (``zoned``). Each compiles, diffs and puts the result through the transitions."""
