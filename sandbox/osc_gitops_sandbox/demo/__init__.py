"""What a person runs: ``osc-gitops demo`` (``story``, with the packet and zone stories) and
``osc-gitops sandbox up/down`` (``session``), plus the zone figures of docs/datapath.md."""
