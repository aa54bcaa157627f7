"""The RBAC table of docs/operations.md, generated from what ``deploy/`` grants.

Each overlay is rendered with the installed ``kubectl kustomize`` (offline); every
RoleBinding and ClusterRoleBinding of a ServiceAccount becomes rows: the ServiceAccount, where
the grant holds (cluster-wide, or a namespace), the resources with their API group, the verbs.
``tests/functional/deploy/test_rbac_doc.py`` fails when the docs' block differs from it;
``python -m tests.support.rbac_doc --write`` rewrites the block.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from tests.support.paths import REPO

__all__ = ["BEGIN", "DOC", "END", "OVERLAYS", "block", "grants", "render", "table"]

DOC = REPO / "docs" / "operations.md"
BEGIN = "<!-- rbac: generated from deploy/ by `python -m tests.support.rbac_doc --write` -->"
END = "<!-- rbac: end -->"
OVERLAYS = (
    "overlays/interconnect",
    "overlays/central-nb/deployment",
    "overlays/central-nb/cronjob",
)
"""Every overlay (``deploy/`` itself is ``overlays/interconnect``)."""


def render(overlay: str) -> list[dict[str, Any]]:
    """The objects ``kubectl kustomize deploy/<overlay>`` builds."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        raise RuntimeError("kubectl is not installed (it builds the kustomizations)")
    out = subprocess.run(
        [kubectl, "kustomize", str(REPO / "deploy" / overlay)],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    return [d for d in YAML(typ="safe").load_all(out) if d]


Grant = tuple[str, str, str, str]
"""``(service account, where, resources, verbs)`` as the table shows them."""


def _resources(rule: Mapping[str, Any]) -> str:
    groups = [g or "core" for g in rule.get("apiGroups") or [""]]
    names = ", ".join(f"`{r}`" for r in rule.get("resources") or ())
    return f"{names} ({', '.join(groups)})"


def grants(docs: Iterable[Mapping[str, Any]]) -> list[Grant]:
    """What each ServiceAccount may do, one row per rule of each bound role."""
    docs = list(docs)
    roles = {
        (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d
        for d in docs
        if d["kind"] in ("Role", "ClusterRole")
    }
    rows: list[Grant] = []
    for binding in docs:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        ref = binding["roleRef"]
        namespace = binding["metadata"].get("namespace", "")
        role = roles.get((ref["kind"], namespace if ref["kind"] == "Role" else "", ref["name"]))
        if role is None:
            continue
        where = f"in `{namespace}`" if binding["kind"] == "RoleBinding" else "cluster-wide"
        for subject in binding.get("subjects") or ():
            if subject.get("kind") != "ServiceAccount":
                continue
            account = f"`{subject['namespace']}/{subject['name']}`"
            for rule in role.get("rules") or ():
                verbs = ", ".join(rule.get("verbs") or ())
                rows.append((account, where, _resources(rule), verbs))
    return sorted(set(rows), key=lambda r: (r[0], r[1] != "cluster-wide", r[1], r[2]))


def table(overlays: Iterable[str] = OVERLAYS) -> str:
    """The markdown tables, one per overlay."""
    out: list[str] = []
    for overlay in overlays:
        out += [f"`deploy/{overlay}`:", "", "| service account | where | resources | verbs |",
                "|---|---|---|---|"]  # fmt: skip
        out += [f"| {a} | {w} | {r} | {v} |" for a, w, r, v in grants(render(overlay))]
        out.append("")
    return "\n".join(out)


def block(text: str, generated: str) -> str:
    """``text`` with the part between :data:`BEGIN` and :data:`END` replaced by
    ``generated``."""
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise ValueError(f"{DOC} has no {BEGIN!r} … {END!r} block")
    return f"{head}{BEGIN}\n\n{generated}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="rewrite the block in the docs")
    args = parser.parse_args(argv)
    text = DOC.read_text(encoding="utf-8")
    wanted = block(text, table())
    if args.write:
        Path(DOC).write_text(wanted, encoding="utf-8")
        return 0
    if wanted != text:
        print(f"{DOC}: the RBAC block differs from deploy/ (--write rewrites it)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
