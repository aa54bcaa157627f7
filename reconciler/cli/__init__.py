"""The ``osc-gitops`` command line: a thin layer of argument parsing over the library."""

from reconciler.cli.app import main

__all__ = ["main"]
