"""Kubernetes writes of one apply: kind after kind in plan order, and within a kind up to the
writer's ``concurrent_writes`` at once; after a failure nothing more starts."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from reconciler.core.model.desired import Desired
from reconciler.core.model.plan import Action, Change, Plan
from reconciler.engine.apply import apply_plan


def change(action: Action, kind: str, name: str) -> Change:
    body = {"metadata": {"name": name}}
    before = None if action == "create" else body
    after = None if action == "delete" else body
    return Change(action, kind, f"osc-vnfs/{name}", "VnfDeployment/fw", "node-1", before, after)


class Writer:
    """Records what it does, how many writes were in flight at once, and fails on request."""

    def __init__(self, concurrent: int | None, fail: str | None = None) -> None:
        if concurrent is not None:
            self.concurrent_writes = concurrent
        self.fail = fail
        self.lock = threading.Lock()
        self.log: list[tuple[str, str, str]] = []
        self.in_flight = 0
        self.most = 0

    def _do(self, verb: str, kind: str, name: str) -> None:
        with self.lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        time.sleep(0.03)
        with self.lock:
            self.in_flight -= 1
            self.log.append((verb, kind, name))
        if name == self.fail:
            raise RuntimeError(f"API server refused {name}")

    def create(self, kind: str, namespace: str, name: str, body: dict[str, Any]) -> object:
        self._do("create", kind, name)
        return None

    def replace_managed(self, kind: str, namespace: str, name: str, body: dict[str, Any]) -> object:
        self._do("update", kind, name)
        return None

    def delete(self, kind: str, namespace: str, name: str) -> object:
        self._do("delete", kind, name)
        return None


class Ovn:
    def apply(self, changes: Any, revision: str | None = None) -> None:
        pass


PLAN = Plan(
    tuple(
        [change("create", "NetworkAttachmentDefinition", f"nad-{i}") for i in range(12)]
        + [change("update", "VirtualMachine", "vm-0")]
        + [change("create", "VirtualMachine", f"vm-{i}") for i in range(1, 6)]
        + [change("delete", "NetworkAttachmentDefinition", f"old-nad-{i}") for i in range(4)]
        + [change("delete", "VirtualMachine", f"old-vm-{i}") for i in range(3)]
    )
)


def kinds_in_order(log: list[tuple[str, str, str]]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for verb, kind, _name in log:
        step = (verb if verb == "delete" else "write", kind)
        if not out or out[-1] != step:
            out.append(step)
    return out


@pytest.mark.parametrize("concurrent", [None, 1, 4])
def test_kind_after_kind_and_all_of_them(concurrent: int | None) -> None:
    kube = Writer(concurrent)
    report = apply_plan(PLAN, kube, Ovn(), desired=Desired())
    assert report.applied == len(PLAN.changes)
    # NADs, then VMs; deletes: VMs, then NADs (each stage over before the next starts)
    assert kinds_in_order(kube.log) == [
        ("write", "NetworkAttachmentDefinition"), ("write", "VirtualMachine"),
        ("delete", "VirtualMachine"), ("delete", "NetworkAttachmentDefinition"),
    ]  # fmt: skip
    if concurrent in (None, 1):
        assert kube.most == 1
    else:
        assert 1 < kube.most <= concurrent
    assert sorted(name for *_, name in kube.log) == sorted(
        c.key.split("/")[1] for c in PLAN.changes
    )


def test_a_failure_stops_the_apply_before_the_next_kind() -> None:
    kube = Writer(4, fail="nad-2")
    with pytest.raises(RuntimeError, match="refused nad-2"):
        apply_plan(PLAN, kube, Ovn(), desired=Desired())
    assert {kind for _verb, kind, _name in kube.log} == {"NetworkAttachmentDefinition"}
    assert len(kube.log) < 12  # those not yet started when nad-2 failed never start
