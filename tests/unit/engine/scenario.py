"""A small world for the engine's unit tests: two nodes, two pods, one firewall bound to the
``web`` group, held by the in-memory fakes of ``tests.support.fakes``."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

from reconciler.core.compiling.compile import CompileOptions
from reconciler.engine.loop import Loop, LoopConfig
from reconciler.engine.sources import ManifestSource
from tests.support.builders import cluster
from tests.support.fakes import FakeClock, FakeKube, FakeLease, FakeOvn, RecordingReporter, world

POLICIES = """\
apiVersion: osc.io/v1alpha1
kind: SecurityGroup
metadata: {name: web}
spec:
  labels: [app=web]
---
apiVersion: osc.io/v1alpha1
kind: VnfDeployment
metadata: {name: firewall}
spec:
  namespace: osc-vnfs
  image: quay.io/example/vnf-firewall:1.4.2
---
apiVersion: osc.io/v1alpha1
kind: Binding
metadata: {name: web-firewall}
spec:
  securityGroup: web
  vnf: firewall
  order: 10
"""

WITHOUT_BINDING = POLICIES.rsplit("---", 1)[0]
"""The same, with the binding removed from git (its steering rows must go)."""

INVALID = POLICIES.replace("kind: SecurityGroup", "kind: SecurityGroupp")


def write_policies(directory: Path, text: str = POLICIES) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "policies.yaml").write_text(text, encoding="utf-8")
    return directory


def fake_world() -> tuple[FakeKube, FakeOvn]:
    """Pods ``shop/web-1`` (app=web, node-1) and ``shop/db-1`` (app=db, node-2)."""
    return world(
        cluster(
            [("shop", "web-1", "node-1", {"app": "web"}), ("shop", "db-1", "node-2", {"app": "db"})]
        )
    )


class Harness:
    """A :class:`Loop` wired to fakes, with a hand-moved clock and no heap settling."""

    def __init__(
        self,
        source: ManifestSource,
        tmp: Path,
        *,
        lease: FakeLease | None = None,
        real_time: bool = False,
        **config: Any,
    ) -> None:
        self.kube, self.ovn = fake_world()
        self.lease = lease
        self.reporter = RecordingReporter()
        self.clock = FakeClock()
        self.settled = 0
        settings: dict[str, Any] = {
            "options": CompileOptions(),
            "status_file": tmp / "status.json",
            "watch": False,
            "lag_retries": (),
        }
        settings.update(config)
        self.loop = Loop(
            LoopConfig(**settings),
            source,
            self.kube,
            self.ovn,
            lease=lease,
            reporter=self.reporter,
            clock=time.monotonic if real_time else self.clock,
            rng=random.Random(7),
            settle=self._settle,
        )

    def _settle(self) -> None:
        self.settled += 1

    @property
    def journal(self) -> list[tuple[Any, ...]]:
        return self.kube.journal.entries

    def revisions_live(self) -> set[str]:
        """The ``osc.io/revision`` of every OVN row we own."""
        return {f["external_ids"]["osc.io/revision"] for f in self.ovn.rows.values()}

    def status(self) -> dict[str, Any]:
        path = self.loop.config.status_file
        assert path is not None
        return dict(json.loads(path.read_text(encoding="utf-8")))
