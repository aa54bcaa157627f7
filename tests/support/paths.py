"""Where the repository's own files are, for tests in any folder."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "reconciler"
EXAMPLES = REPO / "examples"
POLICIES = EXAMPLES / "policies"
CLUSTER = EXAMPLES / "cluster"
