"""The same OVN change set written two more ways, for comparison with ``osc-gitops apply``.

(a) :func:`raw_ops` / :func:`apply_raw`: a hand-written OVSDB JSON-RPC ``transact`` (through the
    sandbox's stdlib client): one ``select`` of the names/UUIDs it must reference (pod LSPs,
    switches, the router), then ONE transaction inserting every row. This is the physical limit
    of the server for these rows.
(b) :func:`nbctl_batches` / :func:`apply_nbctl`: what an admin would script: ``ovn-nbctl`` with
    every command chained by ``--`` in as few processes as the kernel allows (ARG_MAX is 2 MiB
    here, so the 10k scenario needs a few processes; each process is one transaction).

Both take the *create* changes of a plan computed against an NB holding none of our rows, so all
three ways write exactly the same rows. Only the tables the router-policy and network-function
backends use are supported.
"""

from __future__ import annotations

import csv
import io
import subprocess
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from osc_gitops_sandbox.ovn import ovsdb_rpc

from reconciler.core.model.plan import Change

DB = "OVN_Northbound"
SINGLETON = "NB_Global"
ARG_BUDGET = 1_600_000
"""Bytes of argv per ``ovn-nbctl`` process: ARG_MAX is 2 MiB here and counts every word's
pointer (8 bytes) and NUL as well as the environment."""

_PARENT = {
    "Logical_Switch_Port": ("switch", "Logical_Switch", "ports"),
    "ACL": ("port_group", "Port_Group", "acls"),
    "Logical_Router_Policy": ("router", "Logical_Router", "policies"),
    "Network_Function_Health_Check": ("network_function", "Network_Function", "health_check"),
}
_REFS = {
    ("Port_Group", "ports"): "Logical_Switch_Port",
    ("ACL", "network_function_group"): "Network_Function_Group",
    ("Network_Function", "inport"): "Logical_Switch_Port",
    ("Network_Function", "outport"): "Logical_Switch_Port",
    ("Network_Function_Group", "network_function"): "Network_Function",
}


def _creates(changes: Sequence[Change]) -> list[Change]:
    bad = [c for c in changes if c.action != "create" or c.after is None]
    if bad:
        raise ValueError(f"the comparison needs a create-only plan; got {bad[0].action}")
    return list(changes)


def _uuid_name(i: int) -> str:
    return f"r{i}"


def raw_ops(changes: Sequence[Change], existing: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    """One transaction inserting every row; ``existing[table][name]`` = UUID of rows we refer to."""
    created: dict[tuple[str, str], str] = {}
    for i, change in enumerate(_creates(changes)):
        created[(change.kind, change.key)] = _uuid_name(i)

    def ref(table: str, name: str) -> list[str]:
        if (table, name) in created:
            return ["named-uuid", created[(table, name)]]
        return ["uuid", existing[table][name]]

    children: dict[tuple[str, str], list[list[str]]] = defaultdict(list)
    inserts: list[dict[str, Any]] = []
    singletons: list[dict[str, Any]] = []
    for change in changes:
        after = dict(change.after or {})
        if change.kind == SINGLETON and existing.get(SINGLETON):
            # The cluster's one row exists: our keys are set into its maps, as osc-gitops does.
            mutations = [[col, "insert", ovsdb_rpc.to_datum(value)] for col, value in after.items()]
            singletons.append({"op": "mutate", "table": SINGLETON, "where": [],
                               "mutations": mutations})  # fmt: skip
            continue
        row: dict[str, Any] = {}
        parent = _PARENT.get(change.kind)
        for col, value in after.items():
            if parent and col == parent[0]:
                children[(parent[1], str(value))].append(
                    ["named-uuid", created[(change.kind, change.key)]]
                )
                continue
            target_table = _REFS.get((change.kind, col))
            if target_table is not None:
                names = value if isinstance(value, list) else ([] if value is None else [value])
                refs = [ref(target_table, n) for n in names]
                row[col] = (
                    refs[0] if len(refs) == 1 and not isinstance(value, list) else (["set", refs])
                )
            elif value is None:
                row[col] = ["set", []]
            else:
                row[col] = ovsdb_rpc.to_datum(value)
        inserts.append(
            {
                "op": "insert",
                "table": change.kind,
                "uuid-name": created[(change.kind, change.key)],
                "row": row,
            }
        )
    ops: list[dict[str, Any]] = []
    # Children created in this transaction that belong to a parent also created here (ACLs of a
    # new Port_Group) go into the parent's insert; others are mutations of existing parents.
    inserted = [c for c in changes if not (c.kind == SINGLETON and existing.get(SINGLETON))]
    by_name = {(c.kind, c.key): op for c, op in zip(inserted, inserts, strict=True)}
    for (ptable, pname), refs in children.items():
        op = by_name.get((ptable, pname))
        column = next(col for _f, t, col in _PARENT.values() if t == ptable)
        if op is not None:
            op["row"][column] = ["set", refs]
        else:
            ops.append(
                {
                    "op": "mutate",
                    "table": ptable,
                    "where": [["_uuid", "==", ["uuid", existing[ptable][pname]]]],
                    "mutations": [[column, "insert", ["set", refs]]],
                }
            )
    return inserts + ops + singletons


def select_existing(remote: str) -> dict[str, dict[str, str]]:
    """Name -> UUID of every switch, router and LSP, and the NB_Global row if there is one
    (one ``select`` per table, one txn)."""
    tables = ("Logical_Switch_Port", "Logical_Switch", "Logical_Router")
    ops = [{"op": "select", "table": t, "where": [], "columns": ["_uuid", "name"]} for t in tables]
    ops.append({"op": "select", "table": SINGLETON, "where": [], "columns": ["_uuid"]})
    results = ovsdb_rpc.transact(remote, DB, ops)
    existing = {
        t: {row["name"]: row["_uuid"][1] for row in res["rows"]}
        for t, res in zip(tables, results, strict=False)
    }
    singleton = results[-1]["rows"]
    existing[SINGLETON] = {"": singleton[0]["_uuid"][1]} if singleton else {}
    return existing


def apply_raw(remote: str, changes: Sequence[Change]) -> dict[str, float]:
    """(a): select + build + ONE insert transaction. Returns the seconds of each step."""
    t0 = time.perf_counter()
    existing = select_existing(remote)
    t1 = time.perf_counter()
    ops = raw_ops(changes, existing)
    t2 = time.perf_counter()
    ovsdb_rpc.transact(remote, DB, ops, timeout=600)
    t3 = time.perf_counter()
    return {"select": t1 - t0, "build": t2 - t1, "transact": t3 - t2, "total": t3 - t0}


# --- (b) ovn-nbctl -------------------------------------------------------------------------------


def _q(value: Any) -> str:
    """An ovsdb-ctl value: strings double-quoted (C escapes), numbers bare."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def _map(value: dict[str, Any]) -> str:
    return "{" + ",".join(f"{_q(k)}={_q(v)}" for k, v in value.items()) + "}"


def _set(values: Sequence[Any]) -> str:
    return "[" + ",".join(_q(v) for v in values) + "]"


def nbctl_commands(changes: Sequence[Change]) -> list[list[str]]:
    """One list of argv words per logical step; steps never span processes."""
    steps: list[list[str]] = []
    parents: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for i, change in enumerate(_creates(changes)):
        after = dict(change.after or {})
        table = change.kind
        if table == "Port_Group":
            words = ["--", "pg-add", str(after["name"]), *after.get("ports", [])]
            words += [
                "--", "set", "Port_Group", str(after["name"]),
                f"external_ids={_map(after['external_ids'])}",
            ]  # fmt: skip
            steps.append(words)
            continue
        if table not in _PARENT:
            raise ValueError(f"the nbctl comparison does not support {table}")
        field, ptable, pcol = _PARENT[table]
        rid = f"@r{i}"
        cols = []
        for col, value in after.items():
            if col == field:
                continue
            if isinstance(value, dict):
                cols.append(f"{col}={_map(value)}")
            elif isinstance(value, list):
                cols.append(f"{col}={_set(value)}")
            elif value is None:
                cols.append(f"{col}=[]")
            else:
                cols.append(f"{col}={_q(value)}")
        parents[(ptable, str(after[field]), pcol)].append(rid)
        steps.append(["--", f"--id={rid}", "create", table, *cols])
    # Rows are attached to their parents at the end of each process (see nbctl_batches).
    return [*steps, *[["@attach", t, n, c] for (t, n, c) in parents]]


def nbctl_batches(changes: Sequence[Change], budget: int = ARG_BUDGET) -> list[list[str]]:
    """Split the commands into processes under :data:`ARG_BUDGET`; each batch attaches the rows
    it created to their parent (switch/router) with ONE ``add`` per parent (an ``add`` per row
    would rewrite the parent's whole set each time: quadratic)."""
    steps = nbctl_commands(changes)
    batches: list[list[str]] = []
    current: list[str] = []
    pending: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    parent_of: dict[str, tuple[str, str, str]] = {}
    for i, change in enumerate(changes):
        if change.kind in _PARENT:
            field, ptable, pcol = _PARENT[change.kind]
            parent_of[f"@r{i}"] = (ptable, str((change.after or {})[field]), pcol)

    def flush() -> None:
        words = list(current)
        for (t, n, c), ids in pending.items():
            words += ["--", "add", t, n, c, *ids]
        if words:
            batches.append(words)
        current.clear()
        pending.clear()

    size = 0
    for step in steps:
        if step and step[0] == "@attach":
            continue
        step_size = sum(len(w) + 9 for w in step)
        if size + step_size > budget and current:
            flush()
            size = 0
        current.extend(step)
        size += step_size
        rid = next((w[5:] for w in step if w.startswith("--id=")), None)
        if rid is not None:
            pending[parent_of[rid]].append(rid)
            size += len(rid) + 9
    flush()
    return batches


# The network-function backend's rows, with 26.03's own commands (``lsp-add``, ``nf-add``,
# ``nfg-add``, ``pg-add``, ``acl-add ... allow-related NFG``). What those commands cannot set
# is set in a second pass, by UUID: ``acl-add`` names no id to refer to the ACL by, and
# ``ovn-nbctl``'s generic commands do not find a Network_Function(_Group) by name. So the
# second pass is one ``find`` per table for the UUIDs, then batched ``set``s (external_ids,
# the group's fallback, the function's health check).
_NF_ORDER = {
    "Logical_Switch_Port": 0,
    "Network_Function": 1,
    "Network_Function_Group": 2,
    "Port_Group": 3,
    "ACL": 4,
    SINGLETON: 5,
}


@dataclass
class NfScript:
    """The network-function backend's rows as an ``ovn-nbctl`` script."""

    creates: list[list[str]] = field(default_factory=list)
    """Pass 1: one list of argv words per row, in an order where every name a step uses
    already exists."""
    later: dict[str, dict[Any, list[str]]] = field(default_factory=dict)
    """Pass 2: table -> how ``find`` identifies a row (its name; an ACL by direction,
    priority and match) -> the ``set`` arguments after the UUID."""


def nbctl_nf_script(changes: Sequence[Change]) -> NfScript:
    script = NfScript(later={"Network_Function": {}, "Network_Function_Group": {}, "ACL": {}})
    steps: list[tuple[int, list[str]]] = []
    nf_ext: dict[str, str] = {}
    nf_check: dict[str, list[str]] = {}
    for i, change in enumerate(_creates(changes)):
        after = dict(change.after or {})
        table = change.kind
        ext = f"external_ids={_map(after.get('external_ids') or {})}"
        later = script.later.get(table)
        if table == "Logical_Switch_Port":
            name = str(after["name"])
            words = ["--", "lsp-add", str(after["switch"]), name]
            if after.get("options"):
                opts = [f"{k}={v}" for k, v in after["options"].items()]
                words += ["--", "lsp-set-options", name, *opts]
            if after.get("addresses"):
                words += ["--", "lsp-set-addresses", name, *after["addresses"]]
            words += ["--", "set", table, name, ext]
        elif table == "Network_Function":
            name = str(after["name"])
            words = ["--", "nf-add", name, str(after["id"]), str(after["inport"]),
                     str(after["outport"])]  # fmt: skip
            nf_ext[name] = ext
        elif table == "Network_Function_Health_Check":
            hc = f"@hc{i}"
            nf_check[str(after["network_function"])] = [
                f"health_check={hc}", "--", f"--id={hc}", "create", table,
                f"name={_q(after['name'])}", f"options={_map(after.get('options') or {})}", ext,
            ]  # fmt: skip
            continue
        elif table == "Network_Function_Group":
            name = str(after["name"])
            words = ["--", "nfg-add", name, str(after["id"]), str(after["mode"]),
                     *after.get("network_function", [])]  # fmt: skip
            assert later is not None
            later[name] = [ext] + ([f"fallback={_q(after['fallback'])}"]
                                   if after.get("fallback") else [])  # fmt: skip
        elif table == "Port_Group":
            name = str(after["name"])
            words = ["--", "pg-add", name, *after.get("ports", []), "--", "set", table, name, ext]
        elif table == "ACL":
            words = ["--", "--type=port-group"]
            if after.get("name"):
                words.append(f"--name={after['name']}")
            if after.get("tier"):
                words.append(f"--tier={after['tier']}")
            words += ["acl-add", str(after["port_group"]), str(after["direction"]),
                      str(after["priority"]), str(after["match"]),
                      str(after["action"])]  # fmt: skip
            if after.get("network_function_group"):
                words.append(str(after["network_function_group"]))
            assert later is not None
            identity = (str(after["direction"]), int(after["priority"]), str(after["match"]))
            later[identity] = [ext]
        elif table == SINGLETON:
            words = ["--", "set", SINGLETON, "."]
            for col, value in after.items():
                words += [f"{col}:{_q(k)}={_q(v)}" for k, v in (value or {}).items()]
        else:
            raise ValueError(f"the network-function nbctl script does not support {table}")
        steps.append((_NF_ORDER[table], words))
    steps.sort(key=lambda s: s[0])
    script.creates = [w for _o, w in steps]
    for name in sorted(set(nf_ext) | set(nf_check)):
        # the health check last: its arguments end with the command that creates it
        script.later["Network_Function"][name] = [
            *([nf_ext[name]] if name in nf_ext else []),
            *nf_check.get(name, []),
        ]
    return script


def _batches(steps: Sequence[list[str]], budget: int) -> list[list[str]]:
    batches: list[list[str]] = []
    current: list[str] = []
    size = 0
    for step in steps:
        step_size = sum(len(w) + 9 for w in step)
        if size + step_size > budget and current:
            batches.append(current)
            current, size = [], 0
        current.extend(step)
        size += step_size
    if current:
        batches.append(current)
    return batches


def _run_nbctl(nbctl: Sequence[str], env: dict[str, str] | None, remote: str,
               words: Sequence[str]) -> str:  # fmt: skip
    proc = subprocess.run(
        [*nbctl, f"--db={remote}", "--timeout=600", *words],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"ovn-nbctl failed: {proc.stderr.strip()[:500]}")
    return proc.stdout


def apply_nbctl(
    remote: str,
    changes: Sequence[Change],
    nbctl: Sequence[str] = ("ovn-nbctl",),
    env: dict[str, str] | None = None,
    steering: str = "router-policy",
) -> dict[str, float]:
    """(b): run the batches with ``nbctl`` (the argv prefix of the distribution's
    ``ovn-nbctl``); returns seconds and the number of processes."""
    t0 = time.perf_counter()
    if steering != "network-function":
        batches = nbctl_batches(changes)
        for words in batches:
            _run_nbctl(nbctl, env, remote, words)
        return {"total": time.perf_counter() - t0, "processes": float(len(batches))}
    script = nbctl_nf_script(changes)
    batches = _batches(script.creates, ARG_BUDGET)
    for words in batches:
        _run_nbctl(nbctl, env, remote, words)
    processes = len(batches)
    sets: list[list[str]] = []
    for table, wanted in script.later.items():
        if not wanted:
            continue
        columns = "_uuid,direction,priority,match" if table == "ACL" else "_uuid,name"
        found = _run_nbctl(nbctl, env, remote, ["--format=csv", "--data=bare", "--no-headings",
                                                f"--columns={columns}", "find", table])  # fmt: skip
        processes += 1
        for row in csv.reader(io.StringIO(found)):
            if not row:
                continue
            identity: Any = (row[1], int(row[2]), row[3]) if table == "ACL" else row[1]
            args = wanted.get(identity)
            if args is not None:
                sets.append(["--", "set", table, row[0], *args])
    set_batches = _batches(sets, ARG_BUDGET)
    for words in set_batches:
        _run_nbctl(nbctl, env, remote, words)
    processes += len(set_batches)
    return {"total": time.perf_counter() - t0, "processes": float(processes)}
