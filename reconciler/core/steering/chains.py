"""Service chains on OVN 26.03: a chain is wired, not matched.

A Binding's ``vnf`` may list several VNFs (``[ngfw, ids]``): traffic to the group's pods and
from them crosses the VNFs in list order, replies the reverse path. OVN 26.03 has one
Network_Function_Group per ACL and no chain table. Chaining two functions with ACLs (after
hop 1 the packet re-enters the switch from hop 1's out port, and a to-lport ACL matching that
port sends it into hop 2) is correct between pods of one switch only: for routed traffic the
reply skips a hop, because OVN remembers a connection's function in ``ct_label.nf_id`` of the
conntrack zone of the port where the ACL matched, and router ports have no zone; and a third
hop cannot be expressed at all (packets from a function port are never redirected in the
ingress pipeline, and packets from a function's in port skip the egress ACLs). Measured with
packets, reproduced with ``ovn-nbctl`` in ``docs/upstream/``.

So each chain becomes ONE Network_Function per direction and node, whose ports are 802.1Q
child ports (``parent_name`` + ``tag_request``) of the end hops' data NICs, with the hops
joined by two-port **link switches** whose ports are child ports, with the same tag, of the
NICs they join. OVN sees one function: conntrack, replies and failure handling are those of a
single VNF, routed and on one switch. The VMs do not change: a tagged frame reaches a guest on
the NIC it has, and the guest passes 802.1Q frames through unchanged (a bump in the wire does).
Every VNF keeps a single binding's orientation (its data-in NIC faces the protected pod), so
the two directions are wired apart (:class:`Wire`):

- entry (from-lport, traffic from the pod): function in = hop 1 ``in``; links hop i ``out`` ->
  hop i+1 ``in``; function out = hop k ``out``;
- exit (to-lport, traffic to the pod, which OVN sends into the function's *out* port): function
  out = hop 1 ``out``; links hop i ``in`` -> hop i+1 ``out``; function in = hop k ``in``;

so a request crosses hop 1 first either way. A chain's function has no health check: OVN's
probe is addressed to ``svc_monitor_mac``, which every logical switch hands to ovn-controller
in ``ls_in_l2_lkup``, so it cannot cross a link switch (``docs/upstream/``), and OVN 26.03.1
counts a function without a check as always healthy: the failure policy of a chain cannot act.

Names (``osc.io/chain`` = the hops, comma-separated, on every row below), per chain of ``k``
hops, direction ``d`` and node ``n``:

- ``Logical_Switch_Port`` ``nfc<k>_<d>_<h1>_…_<hk>_<n>_in|out`` on ``n``'s switch: the
  function's ports;
- ``Logical_Switch`` ``nfl<k>_<d>_<h1>_…_<hk>_<n>_<i>`` (link ``i`` = 1 … k-1) and its ports
  ``…_<i>a`` (the upstream hop's NIC) and ``…_<i>b`` (the downstream one);
- ``Network_Function`` ``osc.chain<k>_<d>.<h1>.….<hk>.<n>`` and, per failure policy,
  ``Network_Function_Group`` ``<that>.<fail_close|fail_open>``.

Kubernetes names never contain ``_``, so ``_`` separates the parts unambiguously, and a name
with ``_`` is never a node's (a link switch is never taken for a node switch) nor a pod's LSP
(``<namespace>_<pod>`` has one ``_``). The tag (1-4094) is allocated once per chain and
direction and kept (:func:`allocate_tags`), like NF ids.

Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from reconciler.core.model import naming
from reconciler.core.model import ownership as own
from reconciler.core.model.desired import BindingSpec, Desired
from reconciler.core.model.observed import Observed
from reconciler.core.steering.base import CompileError, Instances, TargetBuilder, VnfInstance

__all__ = [
    "ENTRY",
    "EXIT",
    "MAX_TAG",
    "Wire",
    "WireKey",
    "allocate_tags",
    "chain_nodes",
    "emit_wire",
    "function_name",
    "group_name",
    "hop_healthy",
    "hop_policy",
    "paths",
    "port_name",
    "probe_group",
    "probes",
    "target_group",
    "wire_direction",
    "wires",
]

ENTRY = "entry"
EXIT = "exit"
MAX_TAG = 4094
WireKey = tuple[tuple[str, ...], str]
"""``(hops, direction)``: one wiring of a chain, the same on every node."""
WireUse = tuple[tuple[str, ...], str, str]
"""``(hops, direction, node)``: one wiring of a chain on one node."""


def wire_direction(acl_direction: str) -> str:
    """The wiring an ACL of that direction sends packets into: from-lport (traffic from the
    pod) the entry one, to-lport the exit one."""
    return ENTRY if acl_direction == "from-lport" else EXIT


def chain_nodes(hops: Sequence[str], instances: Instances) -> list[str]:
    """The nodes where every hop runs (sorted): a chain missing a hop on a node does not steer
    there (the plan warns, as for a single VNF that does not run there)."""
    first, rest = hops[0], hops[1:]
    if not rest:  # the single form (most bindings): no per-node test; a compile asks per binding
        return sorted(node for vnf, node in instances if vnf == first)
    return sorted(
        node
        for vnf, node in instances
        if vnf == first and all((hop, node) in instances for hop in rest)
    )


def function_name(instance: str, hops: Sequence[str], direction: str, node: str) -> str:
    """``osc.chain<k>_<direction>.<h1>.….<hk>.<node>``: a chain's Network_Function."""
    return naming.ovn_ident(instance, f"chain{len(hops)}_{direction}", *hops, node)


def group_name(instance: str, hops: Sequence[str], direction: str, node: str, fallback: str) -> str:
    """``<function_name>.<fallback>``: a chain's Network_Function_Group for a failure policy."""
    return naming.ovn_ident(instance, f"chain{len(hops)}_{direction}", *hops, node, fallback)


def port_name(hops: Sequence[str], direction: str, node: str, side: str) -> str:
    """``nfc<k>_<direction>_<h1>_…_<hk>_<node>_<side>``: a chain function's port on a node."""
    return f"nfc{len(hops)}_{direction}_{'_'.join(hops)}_{node}_{side}"


@dataclass(frozen=True)
class Wire:
    """One chain, one direction, one node: the rows that wire its hops together."""

    hops: tuple[str, ...]
    direction: str
    node: str
    instances: tuple[VnfInstance, ...]
    """The hops' instances on :attr:`node`, in order."""

    @property
    def key(self) -> WireKey:
        return (self.hops, self.direction)

    @property
    def use(self) -> WireUse:
        return (self.hops, self.direction, self.node)

    @property
    def _stem(self) -> str:
        return f"{len(self.hops)}_{self.direction}_{'_'.join(self.hops)}_{self.node}"

    @property
    def chain_id(self) -> str:
        """``osc.io/chain``: the hops, comma-separated."""
        return ",".join(self.hops)

    def function(self, instance: str) -> str:
        """The Network_Function's name."""
        return function_name(instance, self.hops, self.direction, self.node)

    def group(self, instance: str, fallback: str) -> str:
        """The Network_Function_Group's name for a failure policy."""
        return group_name(instance, self.hops, self.direction, self.node, fallback)

    def port(self, side: str) -> str:
        """The function's ``in`` or ``out`` port (a child port on the node switch)."""
        return port_name(self.hops, self.direction, self.node, side)

    def link(self, i: int) -> str:
        """The link switch between hop ``i`` and hop ``i + 1`` (1-based)."""
        return f"nfl{self._stem}_{i}"

    def ends(self) -> tuple[str, str]:
        """The NICs (their LSPs) the function's in and out ports are child ports of."""
        first, last = self.instances[0], self.instances[-1]
        if self.direction == ENTRY:
            return first.in_port, last.out_port
        return last.in_port, first.out_port

    def links(self) -> list[tuple[str, str]]:
        """Per link, the NICs it joins: the upstream hop's (``a``) and the downstream one's
        (``b``), in the direction a request crosses them."""
        insts = self.instances
        if self.direction == ENTRY:
            return [(insts[i].out_port, insts[i + 1].in_port) for i in range(len(insts) - 1)]
        return [(insts[i].in_port, insts[i + 1].out_port) for i in range(len(insts) - 1)]


def wires(uses: Iterable[WireUse], instances: Instances) -> list[Wire]:
    """The wirings ``uses`` names (a chain, a direction, a node), sorted."""
    out: list[Wire] = []
    for hops, direction, node in sorted(set(uses)):
        insts = tuple(instances[(vnf, node)] for vnf in hops)
        out.append(Wire(hops, direction, node, insts))
    return out


# --- failure policies: each hop's own health ------------------------------------------------


def hop_policy(spec: BindingSpec, hop: VnfInstance) -> str:
    """The failure policy of one hop of a chain (its own, else the Binding's)."""
    return spec.hop_policies[spec.vnfs.index(hop.vnf.metadata.name)].value


def probes(spec: BindingSpec, instances: Instances) -> list[tuple[str, VnfInstance]]:
    """The hop instances (with their node) a chain needs the health of: every hop, on every
    node where the chain runs. When some hop may fail open, a fail-open hop found dead is
    left out (what is left may be a single hop, whose own function then decides); a chain
    whose hops all fail close needs them too: its steering on a node is switched on only once
    every hop there is healthy (``network_function.gating``), and a dead hop later drops the
    chain's traffic, as it should."""
    if not spec.is_chain:
        return []
    return [
        (node, instances[(vnf, node)])
        for node in chain_nodes(spec.vnfs, instances)
        for vnf in spec.vnfs
    ]


def probe_group(instance: str, hop: VnfInstance, policy: str) -> str:
    """The group holding a hop's own (health-checked) function: the one a single-VNF Binding
    with that failure policy uses. northd keeps ``network_function_active`` of every group,
    referenced by an ACL or not, so it reports the hop's health."""
    return naming.network_function_group(instance, hop.vnf.metadata.name, hop.node, policy)


def hop_healthy(instance: str, hop: VnfInstance, observed: Observed, read: set[str]) -> bool:
    """Whether northd counts the hop's own function active in every group of ours holding it
    that it has judged (unknown counts healthy: not judged yet, or no group yet). The groups
    looked at go into ``read`` (the incremental planner compiles again when one changes)."""
    nf = naming.network_function(instance, hop.vnf.metadata.name, hop.node)
    healthy = True
    for policy in ("fail-close", "fail-open"):
        group = probe_group(instance, hop, policy)
        read.add(group)
        if group in observed.nf_active and observed.nf_active[group] != nf:
            healthy = False
    return healthy


def paths(
    desired: Desired,
    instances: Instances,
    observed: Observed,
    instance: str,
    out: TargetBuilder,
) -> dict[tuple[str, str], tuple[str, ...]]:
    """Per (Binding, node where all its VNFs run): the VNFs its traffic crosses there. Its one
    VNF, or its chain; for a chain with a hop found dead (its own function not healthy as
    northd reports it, :func:`hop_healthy`) what is left when every dead hop may fail open (a
    dead fail-close hop keeps the whole chain: the traffic is dropped there, as it should)."""
    result: dict[tuple[str, str], tuple[str, ...]] = {}
    for name, binding in sorted(desired.bindings.items()):
        spec = binding.spec
        probed = any(p.value == "fail-open" for p in spec.hop_policies) and spec.is_chain
        for node in chain_nodes(spec.vnfs, instances):
            hops = spec.vnfs
            if probed:
                dead = [
                    i
                    for i, vnf in enumerate(hops)
                    if not hop_healthy(instance, instances[(vnf, node)], observed, out.health_read)
                ]
                if dead and all(spec.hop_policies[i].value == "fail-open" for i in dead):
                    hops = tuple(vnf for i, vnf in enumerate(hops) if i not in dead)
                    left = " -> ".join(hops) if hops else "no VNF at all"
                    out.warn(
                        "health-check",
                        f"Binding {name}: VnfDeployment "
                        f"{', '.join(spec.vnfs[i] for i in dead)} of the chain {spec.vnf_text} is "
                        f"not healthy on node {node} as OVN reports it and may fail open: the "
                        f"chain's traffic there crosses {left} until it is healthy again",
                        f"Binding/{name}",
                        node,
                    )
            result[(name, node)] = hops
    return result


def target_group(
    instance: str, spec: BindingSpec, path: tuple[str, ...], direction: str, node: str,
    fallback: str,
) -> str | None:  # fmt: skip
    """The Network_Function_Group an ACL of a chain Binding names on a node: the chain's
    wiring for that direction; the one hop left's own group (its own failure policy, its own
    health check); or none when no hop is left (the ACL lets the traffic through unsteered,
    as a single VNF's fail-open group does when its VNF is dead)."""
    if len(path) > 1:
        return group_name(instance, path, wire_direction(direction), node, fallback)
    if len(path) == 1:
        policy = spec.hop_policies[spec.vnfs.index(path[0])].value
        return naming.network_function_group(instance, path[0], node, policy)
    return None


def allocate_tags(
    keys: Iterable[WireKey], all_wires: Sequence[Wire], observed: Observed
) -> dict[WireKey, int]:
    """A VLAN tag per chain wiring (the same on every node), kept while it exists: a tag
    already on one of its live ports stays, new wirings take the lowest free one. Tags only
    need to differ between the wirings that share a NIC, but one tag per wiring everywhere is
    simpler to read and as cheap (4094 of them)."""
    wanted = sorted(set(keys))
    live: dict[str, int] = {}
    for row in observed.ovn_rows:
        if row.table == "Logical_Switch_Port" and own.CHAIN in (
            row.fields.get("external_ids") or {}
        ):
            tag = row.fields.get("tag_request")
            if isinstance(tag, int):
                live[row.key] = tag
    by_key: dict[WireKey, list[Wire]] = {}
    for wire in all_wires:
        by_key.setdefault(wire.key, []).append(wire)
    tags: dict[WireKey, int] = {}
    taken: set[int] = set()
    for key in wanted:
        for wire in by_key.get(key, ()):
            old = live.get(wire.port("in"))
            if old is not None and old not in taken:
                tags[key] = old
                taken.add(old)
                break
    free = (t for t in range(1, MAX_TAG + 1) if t not in taken)
    for key in wanted:
        if key in tags:
            continue
        tag = next(free, None)
        if tag is None:
            raise CompileError(
                f"VLAN tags for service chains exhausted: {len(wanted)} chain wirings need one "
                f"each and 802.1Q has {MAX_TAG}; use fewer distinct chains"
            )
        tags[key] = tag
    return tags


def emit_wire(
    wire: Wire,
    tag: int,
    origin: str,
    nf_ids: Mapping[str, int],
    nfg_ids: Mapping[str, int],
    fallbacks: Iterable[str],
    instance: str,
    out: TargetBuilder,
) -> None:
    """The rows of one wiring (module docstring): the function's two child ports on the node
    switch, a link switch with two child ports per pair of consecutive hops, the function
    (no health check) and its group per failure policy."""
    node = wire.node
    ids = {own.CHAIN: wire.chain_id}
    nf_in, nf_out = wire.port("in"), wire.port("out")
    for port, peer, parent in ((nf_in, nf_out, wire.ends()[0]), (nf_out, nf_in, wire.ends()[1])):
        options = {
            "is-nf": "true",
            "nf-linked-port": peer,
            "receive_multicast": "false",
            "lsp_learn_fdb": "false",
        }
        fields = {"name": port, "switch": node, "addresses": [], "port_security": [],
                  "options": options, "parent_name": parent, "tag_request": tag}  # fmt: skip
        out.ovn("Logical_Switch_Port", port, origin, node, fields, extra_ids=ids)
    for i, (upstream, downstream) in enumerate(wire.links(), 1):
        link = wire.link(i)
        out.ovn("Logical_Switch", link, origin, node, {"name": link}, extra_ids=ids)
        for side, parent in (("a", upstream), ("b", downstream)):
            fields = {"name": f"{link}{side}", "switch": link, "addresses": ["unknown"],
                      "port_security": [], "options": {"lsp_learn_fdb": "false"},
                      "parent_name": parent, "tag_request": tag}  # fmt: skip
            out.ovn("Logical_Switch_Port", f"{link}{side}", origin, node, fields, extra_ids=ids)
    nf = wire.function(instance)
    fields = {"name": nf, "id": nf_ids[nf], "inport": nf_in, "outport": nf_out}
    out.ovn("Network_Function", nf, origin, node, fields, extra_ids=ids)
    for fallback in sorted(fallbacks):
        nfg = wire.group(instance, fallback)
        fields = {"name": nfg, "id": nfg_ids[nfg], "mode": "inline", "fallback": fallback,
                  "network_function": [nf]}  # fmt: skip
        out.ovn("Network_Function_Group", nfg, origin, node, fields, extra_ids=ids)
