"""What a plan shows a reviewer beyond its rows: protection changes, typo guards, diagrams.

``plan`` and ``apply`` both call :func:`annotate` on the plan they made. The protection changes
compare the manifests planned with the manifests *before* (``reconciler.core.protection``), on
the cluster observed. "Before" is, in this order:

1. ``--base DIR``: a folder of manifests given explicitly (in a pull request: the base branch);
2. nothing, when the live state holds nothing this instance owns (no row, no object): then no
   pod is steered now, whatever any manifest says;
3. the manifests the last successful ``apply`` of this instance and scope recorded in its
   cache dir (``<cache-dir>/applied/<instance>.json``), when it was against the same NB and
   kubeconfig; for ``plan --observed``, the record ``osc-gitops snapshot`` found that way and
   embedded in the snapshot (key ``osc_gitops_applied``);
4. otherwise unknown: the plan says so (``protection_changes: null``) and how to tell it.

Why a record and not the live OVN rows: which rows carry the steering of which pod is the
steering backend's business and changes with it; manifests and pods do not.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

RECORD_FORMAT = 1
BASE_HELP = (
    "compare the protection changes with the manifests in DIR (e.g. a checkout of the pull "
    "request's base branch) instead of those last applied from this machine"
)


def add_base_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base", default=None, metavar="DIR", help=BASE_HELP)


def desired_to_json(desired: Any) -> dict[str, Any]:
    """The manifests as JSON (fields left out stay left out, so an omitted ``order`` stays the
    default one)."""
    data: dict[str, Any] = desired.model_dump(mode="json", exclude_unset=True)
    return data


def desired_from_json(data: Any) -> Any:
    from reconciler.core.model import Desired

    return Desired.model_validate(data)


def endpoint_of(args: argparse.Namespace) -> dict[str, Any]:
    """What identifies the cluster a command talks to (for matching an applied record)."""
    kubeconfig = getattr(args, "kubeconfig", None)
    return {
        "ovn_nb": getattr(args, "ovn_nb", None),
        "kubeconfig": os.path.abspath(kubeconfig) if kubeconfig else None,
        "context": getattr(args, "context", None),
        "in_cluster": bool(getattr(args, "in_cluster", False)),
    }


def record_path(args: argparse.Namespace) -> Path:
    from reconciler.cli.apply import status_name
    from reconciler.cli.common import cache_dir

    return cache_dir(args) / "applied" / f"{status_name(args)}.json"


def write_applied(args: argparse.Namespace, desired: Any, revision: str | None) -> None:
    """After a successful apply: what it applied, for the next plan's protection changes. A
    record that cannot be written is a warning (the apply stands)."""
    path = record_path(args)
    record = {
        "format_version": RECORD_FORMAT,
        "instance": args.instance,
        "applied_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "source": getattr(args, "repo", None) or getattr(args, "path", None),
        "revision": revision,
        "endpoint": endpoint_of(args),
        "manifests": desired_to_json(desired),
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        print(f"warning: cannot record the applied manifests in {path}: {exc}", file=sys.stderr)


SNAPSHOT_KEY = "osc_gitops_applied"
"""Where ``osc-gitops snapshot`` puts the applied record it found (plans of the snapshot then
compare with it)."""


def applied_record(args: argparse.Namespace) -> dict[str, Any] | None:
    """The record the last apply from here to this cluster wrote (``None``: none, or for
    another cluster)."""
    try:
        record = json.loads(record_path(args).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("format_version") != RECORD_FORMAT:
        return None
    if record.get("endpoint") != endpoint_of(args):
        return None
    return record


def read_applied(
    args: argparse.Namespace, record: dict[str, Any] | None = None
) -> tuple[Any, str] | None:
    """The manifests last applied from here to this cluster (or those of ``record``, e.g. the
    one a snapshot carries), and how to describe them."""
    from pydantic import ValidationError

    record = record if record is not None else applied_record(args)
    if not isinstance(record, dict) or record.get("format_version") != RECORD_FORMAT:
        return None
    try:
        desired = desired_from_json(record.get("manifests"))
    except ValidationError:
        return None
    revision = f" (commit {record['revision'][:12]})" if record.get("revision") else ""
    return desired, (
        f"the manifests applied from {record.get('source')}{revision} at {record.get('applied_at')}"
    )


def owns_nothing(observed: Any) -> bool:
    return not observed.ovn_rows and not observed.kube_objects


def before_of(
    args: argparse.Namespace, observed: Any, *, offline: bool = False
) -> tuple[Any | None, dict[str, str]]:
    """The manifests to compare with, and the basis (``meta["protection_basis"]``)."""
    from reconciler.cli.common import load_manifests
    from reconciler.core.model import Desired

    base = getattr(args, "base", None)
    if base:
        return load_manifests(base), {"source": "base", "detail": f"the manifests in {base}"}
    if owns_nothing(observed):
        return Desired(), {
            "source": "nothing-applied",
            "detail": "nothing applied (this instance owns no row or object yet)",
        }
    carried = getattr(args, "snapshot_applied", None)  # what `snapshot` embedded
    record = read_applied(args, carried) if offline and carried else None
    if not offline:
        record = read_applied(args)
    if record is not None:
        return record[0], {"source": "applied", "detail": record[1]}
    why = "a snapshot" if offline else "this cluster"
    return None, {
        "source": "none",
        "detail": f"no record here of the manifests applied to {why}: pass --base DIR (e.g. "
        "the pull request's base branch) to compare with them",
    }


def annotate(
    plan: Any, desired: Any, observed: Any, before: Any | None, basis: dict[str, str]
) -> Any:
    """``plan`` with its protection changes, typo warnings first among its warnings, and the
    bindings of each changed group (for the pull-request diagram)."""
    from reconciler.core.protection import protection_changes, to_json
    from reconciler.core.typos import typo_warnings
    from reconciler.render.mermaid import group_bindings

    changes = protection_changes(before, observed, desired) if before is not None else ()
    warnings = typo_warnings(desired, observed, changes)
    groups = {c.security_group for c in changes}
    for change in plan.changes:
        kind, _, name = change.origin.partition("/")
        if kind == "SecurityGroup":
            groups.add(name)
        elif kind == "Binding":
            binding = desired.bindings.get(name) or (before.bindings.get(name) if before else None)
            if binding is not None:
                groups.add(binding.spec.securityGroup)
    meta = {
        **plan.meta,
        "protection_changes": to_json(changes) if before is not None else None,
        "protection_basis": basis,
        "group_bindings": group_bindings(desired, groups),
    }
    return replace(plan, warnings=(*warnings, *plan.warnings), meta=meta)


def merged_zones(snapshot_data: dict[str, Any]) -> Any:
    """One ``Observed`` of a zoned snapshot's pods, ports, nodes and switches (what protection
    changes read), with the owned rows of every zone."""
    from reconciler.core.observed import Observed
    from reconciler.core.zoned import ZonedSnapshot

    snapshot = ZonedSnapshot.from_json(snapshot_data)
    zones = [zone.observed for zone in snapshot.zones.values()]
    return Observed(
        pods=tuple(p for z in zones for p in z.pods),
        nodes=snapshot.central.nodes,
        kube_objects=snapshot.central.kube_objects,
        pod_ports=tuple(p for z in zones for p in z.pod_ports),
        switches=tuple(s for z in zones for s in z.switches),
        ovn_rows=tuple(r for z in zones for r in z.ovn_rows),
    )
