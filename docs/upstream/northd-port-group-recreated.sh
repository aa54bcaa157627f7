#!/bin/sh
# OVN 25.09.0-25.09.3, 26.03.0-26.03.1: a Port_Group deleted and created again under the same
# name, both before ovn-northd runs once, loses its Southbound Port_Group row: every ACL on it
# stops matching, and nothing brings the row back until the group changes again or northd
# recomputes.
#
# Topology (one chassis): logical switch sw0 with port p1 (bound here: an OVS internal port);
# Port_Group pg0 = {p1} with one ACL, to-lport 1001 "outport == @pg0 && ip4.src == 10.0.0.9"
# allow-related (how OVN-Kubernetes writes a NetworkPolicy: a group per policy, an ACL per rule).
#
# What OVN-Kubernetes does on every NetworkPolicy update (no update function for policies: the
# old one is deleted, then the new one added, group names hashed from namespace and policy
# name), two NB transactions back to back: delete pg0, then create pg0 again (new UUID, same
# name, same port, the ACL again). Expected: the SB keeps a Port_Group "<tunnel key>_pg0" with
# p1, and the ACL's OpenFlow flows stay on br-int.
#
# Seen with ovn-northd 26.03.1 when northd handles both transactions in one iteration (a busy
# northd; here: northd stopped with SIGSTOP across the two, as OVN's own test suite does with
# sleep_northd): the SB row is deleted, the logical flows of the ACL still say "@pg0", and
# ovn-controller, which expands @pg0 from the SB row, installs no flow for the ACL. In
# port_group_nb_port_group_handler (northd/en-port-group.c) the deleted group's SB name goes
# into stale_sb_port_groups, the re-created group updates the SB row under that same name, and
# the stale set, processed last, deletes it. Fixed upstream by "northd: Fix port group I-P for
# recreated groups" (ovn-org/ovn 5ae42c888, in 26.03.2 and 25.09.4; bug introduced in 25.09.0
# by a1d82e9fa11e "northd: Process port_group changes incrementally").
#
# Two controls, same northd: the delete and the re-create with northd's --wait=sb in between,
# and the group emptied and refilled in place (one row updated, never deleted) while northd is
# stopped: both keep the SB row and the flows. That is the workaround for a writer: never let a
# group's deletion and its re-creation reach northd together.
#
# Needs: root (ovs-vswitchd's userspace datapath runs in a network namespace of its own), and
# OVN >= 25.09 / OVS tools on PATH (ovsdb-tool, ovsdb-server, ovs-vswitchd, ovs-vsctl,
# ovs-ofctl, ovs-appctl, ovn-northd, ovn-controller, ovn-nbctl, ovn-sbctl, ovn-appctl).
# Everything runs in a fresh temp dir and a private network namespace, removed on exit
# (KEEP=1 keeps them). Schemas from OVN_SCHEMA_DIR / OVS_SCHEMA_DIR (default /usr/share/...).
# Prints "BUG: ..." and exits 0 when the bug shows (the re-created group lost its SB row and
# its flows, and both controls kept theirs); prints "OK: ..." and exits 1 otherwise.
set -eu

OVN_SCHEMA_DIR=${OVN_SCHEMA_DIR:-/usr/share/ovn}
OVS_SCHEMA_DIR=${OVS_SCHEMA_DIR:-/usr/share/openvswitch}
dir=$(mktemp -d /tmp/pg-recreated.XXXXXX)
ns=pgre$$
for v in OVS_RUNDIR OVS_LOGDIR OVS_DBDIR OVS_SYSCONFDIR OVN_RUNDIR OVN_LOGDIR OVN_DBDIR \
         OVN_SYSCONFDIR; do
    export "$v=$dir"
done
NB="unix:$dir/nb.sock"
SB="unix:$dir/sb.sock"
OVS="unix:$dir/db.sock"

cleanup() {
    [ -f "$dir/northd.pid" ] && kill -CONT "$(cat "$dir/northd.pid")" 2>/dev/null || true
    [ -n "${KEEP:-}" ] && { echo "kept: $dir, namespace $ns-host"; return; }
    for p in "$dir"/*.pid; do
        [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null || true
    done
    ip netns delete "$ns-host" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM

daemon() {  # name, then the command; detached, with a pidfile, log and control socket
    name=$1; shift
    "$@" --detach --no-chdir --pidfile="$dir/$name.pid" --log-file="$dir/$name.log" \
        --unixctl="$dir/$name.ctl" -vconsole:off 2>>"$dir/$name.stderr"
}

# --- a fresh OVN: NB, SB, northd; OVS (netdev) in a namespace of its own; ovn-controller
ovsdb-tool create "$dir/nb.db" "$OVN_SCHEMA_DIR/ovn-nb.ovsschema"
ovsdb-tool create "$dir/sb.db" "$OVN_SCHEMA_DIR/ovn-sb.ovsschema"
ovsdb-tool create "$dir/conf.db" "$OVS_SCHEMA_DIR/vswitch.ovsschema"
daemon nb ovsdb-server --remote="p$NB" "$dir/nb.db"
daemon sb ovsdb-server --remote="p$SB" "$dir/sb.db"
daemon ovs ovsdb-server --remote="p$OVS" "$dir/conf.db"
daemon northd ovn-northd --ovnnb-db="$NB" --ovnsb-db="$SB"
ovn-nbctl --db="$NB" init
ovs-vsctl --db="$OVS" --no-wait init -- set Open_vSwitch . external_ids:system-id=hv1 \
    external_ids:ovn-remote="$SB" external_ids:ovn-encap-type=geneve \
    external_ids:ovn-encap-ip=127.0.0.1 external_ids:ovn-bridge-datapath-type=netdev \
    -- add-br br-int -- set Bridge br-int datapath_type=netdev fail-mode=secure
ip netns add "$ns-host"
daemon vswitchd ip netns exec "$ns-host" ovs-vswitchd "$OVS"
daemon controller ovn-controller "$OVS"

nbctl() { ovn-nbctl --db="$NB" "$@"; }
northd=$(cat "$dir/northd.pid")
nbctl ls-add sw0 -- lsp-add sw0 p1 -- lsp-set-addresses p1 "0a:00:00:00:00:01 10.0.0.1"
ovs-vsctl --db="$OVS" add-port br-int p1 -- set Interface p1 type=internal \
    external_ids:iface-id=p1
create_pg0() {  # the group and its ACL, one transaction
    nbctl pg-add pg0 p1 \
        -- acl-add pg0 to-lport 1001 "outport == @pg0 && ip4.src == 10.0.0.9" allow-related
}
create_pg0
nbctl --wait=hv --timeout=30 sync

sb_rows() {  # the SB Port_Groups named after pg0 (one per switch: "<tunnel key>_pg0")
    ovn-sbctl --db="$SB" --bare --columns=name,ports find Port_Group | tr '\n' ' ' |
        tr -s ' ' | grep -o '[0-9]*_pg0 p1' || echo none
}
acl_flows() {  # OpenFlow flows of the ACL on br-int (its match names the peer address)
    ovs-ofctl dump-flows "unix:$dir/br-int.mgmt" | grep -c 'nw_src=10.0.0.9' || true
}
nb_row() {  # pg0 in the NB, and how many ports it holds
    ports=$(nbctl --bare --columns=ports find Port_Group name=pg0)
    if [ -n "$(nbctl --bare --columns=name find Port_Group name=pg0)" ]; then
        echo "pg0 ($(echo "$ports" | wc -w) port)"
    else
        echo none
    fi
}
show() {  # label
    nbctl --wait=hv --timeout=30 sync
    printf '%-54s NB: %-12s SB: %-8s ACL flows: %s\n' "$1" "$(nb_row)" "$(sb_rows)" \
        "$(acl_flows)"
}

show "1. pg0 = {p1} with its ACL:"
before_rows=$(sb_rows); before_flows=$(acl_flows)

# 2. The NetworkPolicy update: delete pg0, create it again; northd handles both at once.
kill -STOP "$northd"
nbctl pg-del pg0
create_pg0
kill -CONT "$northd"
show "2. deleted, re-created (one northd iteration):"
bug_rows=$(sb_rows); bug_flows=$(acl_flows)
echo "   logical flows still naming @pg0: $(ovn-sbctl --db="$SB" lflow-list sw0 | grep -c '@pg0')"
sleep 2
show "   2 s later, nothing changed meanwhile:"
ovn-appctl -t "$dir/northd.ctl" inc-engine/recompute >/dev/null
show "   after ovn-appctl inc-engine/recompute (northd):"

# Controls.
nbctl --wait=sb pg-del pg0
create_pg0
show "3. deleted, northd --wait=sb, re-created:"
ctl_wait_rows=$(sb_rows); ctl_wait_flows=$(acl_flows)
kill -STOP "$northd"
nbctl clear Port_Group pg0 ports
nbctl pg-set-ports pg0 p1
kill -CONT "$northd"
show "4. emptied, refilled in place (one northd iteration):"
ctl_place_rows=$(sb_rows); ctl_place_flows=$(acl_flows)

echo "versions: $(ovn-northd --version | head -1); $(ovn-controller --version | head -1);" \
    "$(ovs-vswitchd --version | head -1)"
if [ "$before_rows" != none ] && [ "$before_flows" -gt 0 ] && [ "$bug_rows" = none ] &&
   [ "$bug_flows" -eq 0 ] && [ "$ctl_wait_rows" != none ] && [ "$ctl_wait_flows" -gt 0 ] &&
   [ "$ctl_place_rows" != none ] && [ "$ctl_place_flows" -gt 0 ]; then
    echo "BUG: the re-created Port_Group pg0 has no Southbound row and its ACL no flow"
    exit 0
fi
echo "OK: the re-created Port_Group kept its Southbound row and its ACL's flows"
exit 1
