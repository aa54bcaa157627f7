"""Fixtures: a git remote made with plain git and a seeded sandbox (``tests.fixtures.gitops``)."""

from tests.fixtures.gitops import cluster, remote  # noqa: F401
