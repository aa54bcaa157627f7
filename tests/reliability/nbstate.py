"""Raw views of the NB for the fault tests, read with plain JSON-RPC (not the adapter under test).

- :func:`owned` — our rows, in a form independent of UUIDs, to compare "fully before / fully
  after" exactly;
- :func:`problems` — the consistency invariants every fault must preserve (no duplicate
  ``osc.io/key``, no orphan ACL, every NF port referenced, NF ids unique, no dangling refs);
- :func:`foreign` — every row we do not own, minus our own LSPs in switches' ``ports`` (the one
  foreign column we are allowed to touch), to prove foreign rows never change.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from osc_gitops_sandbox.ovn import ovsdb_rpc

NB = "OVN_Northbound"
OWNED_TABLES = (
    "Logical_Switch_Port",
    "Port_Group",
    "ACL",
    "Network_Function",
    "Network_Function_Group",
)
ALL_TABLES = (*OWNED_TABLES, "Logical_Switch", "Logical_Router", "Logical_Router_Policy")
IGNORED = ("_uuid", "_version", "network_function_active")
"""Not part of what we write: northd's verdict on a group changes on its own time (here the
sandbox plays VNFs answering OVN's probe, osc_gitops_sandbox.ovn.vnf_health)."""
OWNER = "osc.io/owner"
KEY = "osc.io/key"


def as_list(value: Any) -> list[Any]:
    """The raw dump gives a one-element set as its element (OVSDB's datum shorthand)."""
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def dump(remote: str, tables: tuple[str, ...] = ALL_TABLES) -> dict[str, list[dict[str, Any]]]:
    return ovsdb_rpc.dump(remote, NB, list(tables))


def _ext(row: dict[str, Any]) -> dict[str, str]:
    return dict(row.get("external_ids") or {})


def _is_ours(row: dict[str, Any], instance: str = "osc-gitops") -> bool:
    return _ext(row).get(OWNER) == instance


def owned(
    remote: str, instance: str = "osc-gitops", data: dict[str, Any] | None = None
) -> dict[str, list[str]]:
    """Our rows per table as sorted canonical JSON strings, references resolved to names/keys
    (so two dumps compare equal exactly when the same rows exist with the same content)."""
    data = data or dump(remote)
    names: dict[str, str] = {}
    for table in data:
        for row in data[table]:
            label = row.get("name") or _ext(row).get(KEY) or row["_uuid"]
            names[row["_uuid"]] = f"{table}:{label}"

    def resolve(value: Any) -> Any:
        if isinstance(value, str) and value in names:
            return names[value]
        if isinstance(value, list):
            return sorted((resolve(v) for v in value), key=str)
        if isinstance(value, dict):
            return {k: resolve(v) for k, v in sorted(value.items())}
        return value

    out: dict[str, list[str]] = {}
    for table in OWNED_TABLES:
        rows = []
        for row in data.get(table, []):
            if not _is_ours(row, instance):
                continue
            clean = {k: resolve(v) for k, v in row.items() if k not in IGNORED}
            ext = dict(clean.get("external_ids") or {})
            ext.pop("osc.io/revision", None)
            clean["external_ids"] = ext
            rows.append(json.dumps(clean, sort_keys=True, default=str))
        out[table] = sorted(rows)
    return out


def owned_count(state: dict[str, list[str]]) -> int:
    return sum(len(v) for v in state.values())


def problems(remote: str, instance: str = "osc-gitops") -> list[str]:
    """Every violated invariant of our rows (empty = consistent)."""
    data = dump(remote)
    found: list[str] = []
    by_uuid = {row["_uuid"]: (t, row) for t in data for row in data[t]}
    for table in OWNED_TABLES:
        ours = [r for r in data[table] if _is_ours(r, instance)]
        keys = Counter(_ext(r).get(KEY) or r.get("name") for r in ours)
        found += [f"{table}: {n} rows with key {k!r}" for k, n in keys.items() if n > 1]
        found += [f"{table}: owned row without osc.io/key" for r in ours if not _ext(r).get(KEY)]
    acl_parents: Counter[str] = Counter()
    for pg in data["Port_Group"]:
        for acl in as_list(pg.get("acls")):
            acl_parents[acl] += 1
        for port in as_list(pg.get("ports")):
            if port not in by_uuid:
                found.append(f"Port_Group {pg['name']}: dangling port {port}")
    for acl in data["ACL"]:
        if _is_ours(acl, instance):
            if acl_parents[acl["_uuid"]] != 1:
                found.append(f"ACL {_ext(acl).get(KEY)}: in {acl_parents[acl['_uuid']]} groups")
            parent = [pg for pg in data["Port_Group"] if acl["_uuid"] in as_list(pg.get("acls"))]
            if parent and not _is_ours(parent[0], instance):
                found.append(f"ACL {_ext(acl).get(KEY)}: in a foreign Port_Group")
            for nfg in as_list(acl.get("network_function_group")):
                if nfg not in by_uuid:
                    found.append(f"ACL {_ext(acl).get(KEY)}: dangling NFG {nfg}")
    nf_ports: set[str] = set()
    for table in ("Network_Function", "Network_Function_Group"):
        ids = Counter(r.get("id") for r in data.get(table, []))
        found += [f"{table}: id {i} used {n} times" for i, n in ids.items() if n > 1]
    for nf in data.get("Network_Function", []):
        for col in ("inport", "outport"):
            ref = nf.get(col)
            if ref not in by_uuid:
                found.append(f"Network_Function {nf['name']}: dangling {col}")
            else:
                nf_ports.add(ref)
    in_switch = {p for ls in data["Logical_Switch"] for p in as_list(ls.get("ports"))}
    for lsp in data["Logical_Switch_Port"]:
        if not _is_ours(lsp, instance):
            continue
        if lsp["_uuid"] not in in_switch:
            found.append(f"LSP {lsp['name']}: in no switch (orphan)")
        if data.get("Network_Function") is not None and lsp["_uuid"] not in nf_ports:
            found.append(f"LSP {lsp['name']}: NF port referenced by no Network_Function")
    return found


def foreign(remote: str, instance: str = "osc-gitops") -> str:
    """Canonical JSON of every row we do not own (switch ``ports`` without our LSPs)."""
    data = dump(remote)
    ours = {r["_uuid"] for t in OWNED_TABLES for r in data.get(t, []) if _is_ours(r, instance)}
    out: dict[str, list[str]] = {}
    for table, rows in data.items():
        kept = []
        for row in rows:
            if row["_uuid"] in ours:
                continue
            row = {k: v for k, v in row.items() if k != "_version"}
            if table == "Logical_Switch":
                row["ports"] = sorted(p for p in as_list(row.get("ports")) if p not in ours)
            if table == "Port_Group":
                row["acls"] = sorted(as_list(row.get("acls")))
            kept.append(json.dumps(row, sort_keys=True, default=str))
        out[table] = sorted(kept)
    return json.dumps(out, sort_keys=True)


def foreign_changes(before: str, after: str) -> int:
    """Number of foreign rows that differ between two :func:`foreign` dumps."""
    a, b = json.loads(before), json.loads(after)
    changed = 0
    for table in set(a) | set(b):
        changed += len(set(a.get(table, [])) ^ set(b.get(table, [])))
    return changed
