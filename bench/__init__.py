"""Benchmarks of osc-gitops at 1k/10k/50k pods (issue 7); entry point ``python -m bench``."""
