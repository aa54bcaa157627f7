#!/bin/sh
# OVN 26.03: a from-lport Network Function and a load balancer on the same logical switch:
# the client's connections to the VIP never complete.
#
# Topology (one chassis, one logical switch sw0 behind a router lr0 10.0.0.254, the pods'
# default gateway, as OVN-Kubernetes' node switch sits behind ovn_cluster_router):
#   client 10.0.0.1 --+                    +-- server 10.0.0.2 (listens on 8080)
#                     +------ sw0 ---------+-- lr0
#   nf-in / nf-out: a Network Function (nf0, group nfg0, inline) whose VNF is a Linux bridge
#   between its two NICs (a bump in the wire: frames cross unchanged)
#   ACL  pg0 (client) from-lport 1001 "inport == @pg0 && ip4" allow-related nfg0
#   LB   lb0 10.96.0.100:80 -> 10.0.0.2:8080 (tcp), on sw0
#
# Expected: client -> 10.96.0.100:80 connects, through the VNF (as client -> 10.0.0.2:8080 does).
# Seen with ovn-northd/ovn-controller 26.03.1 + OVS 4.0.0 (userspace datapath): the SYN is
# load-balanced (DNAT to 10.0.0.2:8080 in the client's conntrack zone), redirected to nf-in,
# crosses the VNF, re-enters at nf-out (committed in nf-out's zone with the DNATed tuple) and
# reaches the server; the SYN-ACK is un-DNATed in the client's zone first, then looked up in
# nf-out's zone, where its tuple (10.96.0.100:80 -> client) matches nothing: ct_state +inv,
# dropped. The connection never completes. Without the LB (direct to 10.0.0.2) or without the
# NF on the ACL, it does. The same holds across chassis, and in an OVN-Kubernetes cluster
# (its Service load-balancer group is on every node switch), for every pod whose egress is
# steered through a Network Function: it can reach no ClusterIP Service.
#
# Needs: root, iproute2, python3, and OVN >= 26.03 / OVS tools on PATH (ovsdb-tool,
# ovsdb-server, ovs-vswitchd, ovs-vsctl, ovs-appctl, ovn-northd, ovn-controller, ovn-nbctl).
# Everything runs in a fresh temp dir and private network namespaces, removed on exit
# (KEEP=1 keeps them). Schemas from OVN_SCHEMA_DIR / OVS_SCHEMA_DIR (default /usr/share/...).
# Exit code 0 when the bug shows (direct works, VIP fails, VIP works without the NF).
# Last, a workaround: with two allow-stateless ACLs on a port group of the function's two
# ports (from-lport inport, to-lport outport), the VIP connection completes through the NF.
set -eu

OVN_SCHEMA_DIR=${OVN_SCHEMA_DIR:-/usr/share/ovn}
OVS_SCHEMA_DIR=${OVS_SCHEMA_DIR:-/usr/share/openvswitch}
dir=$(mktemp -d /tmp/nf-lb.XXXXXX)
ns=nflb$$
for v in OVS_RUNDIR OVS_LOGDIR OVS_DBDIR OVS_SYSCONFDIR OVN_RUNDIR OVN_LOGDIR OVN_DBDIR \
         OVN_SYSCONFDIR; do
    export "$v=$dir"
done
NB="unix:$dir/nb.sock"
SB="unix:$dir/sb.sock"
OVS="unix:$dir/db.sock"

cleanup() {
    [ -n "${KEEP:-}" ] && { echo "kept: $dir, namespaces $ns-*"; return; }
    for p in "$dir"/*.pid; do
        [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null || true
    done
    for n in host client server vnf; do ip netns delete "$ns-$n" 2>/dev/null || true; done
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
for n in host client server vnf; do
    ip netns add "$ns-$n"
    ip netns exec "$ns-$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
    ip -n "$ns-$n" link set lo up
done
daemon vswitchd ip netns exec "$ns-host" ovs-vswitchd "$OVS"
daemon controller ovn-controller "$OVS"

# --- the logical topology
nbctl() { ovn-nbctl --db="$NB" "$@"; }
nbctl ls-add sw0
nbctl lr-add lr0 -- lrp-add lr0 lr0-sw0 0a:00:00:00:00:fe 10.0.0.254/24
nbctl lsp-add sw0 sw0-lr0 -- lsp-set-type sw0-lr0 router \
    -- lsp-set-addresses sw0-lr0 router -- lsp-set-options sw0-lr0 router-port=lr0-sw0
nbctl lsp-add sw0 client -- lsp-set-addresses client "0a:00:00:00:00:01 10.0.0.1"
nbctl lsp-add sw0 server -- lsp-set-addresses server "0a:00:00:00:00:02 10.0.0.2"
for p in nf-in nf-out; do
    other=$([ $p = nf-in ] && echo nf-out || echo nf-in)
    nbctl lsp-add sw0 $p -- lsp-set-options $p is-nf=true nf-linked-port=$other \
        receive_multicast=false lsp_learn_fdb=false
done
nbctl nf-add nf0 1 nf-in nf-out
nbctl nfg-add nfg0 1 inline nf0
nbctl pg-add pg0 client
nbctl acl-add pg0 from-lport 1001 "inport == @pg0 && ip4" allow-related nfg0
nbctl lb-add lb0 10.96.0.100:80 10.0.0.2:8080 tcp
nbctl ls-lb-add sw0 lb0

# --- the "pods" and the VNF, plugged as a CNI plugin would (TX checksum offload off: the
# userspace datapath's conntrack needs full checksums)
txoff() {  # netns ifname: what `ethtool -K IF tx off` does (the ioctl; no ethtool needed)
    ip netns exec "$1" python3 -c '
import array, fcntl, socket, struct, sys
value = array.array("B", struct.pack("II", 0x17, 0))  # ETHTOOL_STXCSUM, off
request = struct.pack("16sP", sys.argv[1].encode(), value.buffer_info()[0])
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
fcntl.ioctl(sock.fileno(), 0x8946, request)  # SIOCETHTOOL' "$2"
}
plug() {  # netns, ifname, logical port, mac, [ip]
    veth="v$(printf %s "$3" | tr -cd 'a-z0-9' | cut -c1-8)"
    ip -n "$ns-host" link add "$veth" type veth peer name "$2" netns "$ns-$1"
    ip -n "$ns-host" link set "$veth" up
    txoff "$ns-host" "$veth"
    txoff "$ns-$1" "$2"
    ip -n "$ns-$1" link set "$2" address "$4" up
    if [ -n "${5:-}" ]; then
        ip -n "$ns-$1" addr add "$5/24" dev "$2"
        ip -n "$ns-$1" route add default via 10.0.0.254
    fi
    ovs-vsctl --db="$OVS" add-port br-int "$veth" -- set Interface "$veth" \
        external_ids:iface-id="$3"
}
plug client eth0 client 0a:00:00:00:00:01 10.0.0.1
plug server eth0 server 0a:00:00:00:00:02 10.0.0.2
plug vnf eth0 nf-in 0a:00:00:00:00:0a
plug vnf eth1 nf-out 0a:00:00:00:00:0b
ip -n "$ns-vnf" link add br0 type bridge stp_state 0 forward_delay 0 mcast_snooping 0
for i in eth0 eth1; do
    ip -n "$ns-vnf" link set "$i" master br0
    ip -n "$ns-vnf" link set "$i" type bridge_slave learning off flood on
done
ip -n "$ns-vnf" link set br0 up
nbctl --wait=hv --timeout=30 sync
ovs-appctl -t "$dir/vswitchd.ctl" revalidator/purge

# --- TCP through it (python3: no particular netcat needed)
ip netns exec "$ns-server" python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.0.0.2", 8080)); s.listen(16)
while True:
    c, _ = s.accept(); c.close()' &
server=$!
sleep 0.3
connect() {  # dst port -> prints connected / timed out
    ip netns exec "$ns-client" python3 -c '
import socket, sys
s = socket.socket(); s.settimeout(3)
try:
    s.connect((sys.argv[1], int(sys.argv[2]))); print("connected")
except OSError as e:
    print("FAILED:", e)' "$1" "$2"
}
vnf_frames() {  # frames the VNF sent out of nf-out's NIC (what entered it at nf-in)
    ip netns exec "$ns-vnf" cat /sys/class/net/eth1/statistics/tx_packets
}

printf 'client -> server 10.0.0.2:8080 (direct):         '; direct=$(connect 10.0.0.2 8080); echo "$direct"
before=$(vnf_frames)
printf 'client -> VIP 10.96.0.100:80 (load balancer):    '; vip=$(connect 10.96.0.100 80); echo "$vip"
echo "frames that crossed the VNF meanwhile (SYN and its retransmits): $(($(vnf_frames) - before))"
echo "conntrack on hv1 after the VIP attempt (client, nf-in, nf-out zones):"
ovs-appctl -t "$dir/vswitchd.ctl" dpctl/dump-conntrack netdev@ovs-netdev | grep -E 'dst=10.96.0.100|SYN_SENT' || true
nbctl acl-del pg0
nbctl acl-add pg0 from-lport 1001 "inport == @pg0 && ip4" allow-related
nbctl --wait=hv --timeout=30 sync
ovs-appctl -t "$dir/vswitchd.ctl" revalidator/purge
printf 'the same ACL without the Network Function, VIP:  '; plain=$(connect 10.96.0.100 80); echo "$plain"
# A workaround (what osc-gitops does): the function's ports keep no connection state of their
# own. Both directions on both ports are needed (to-lport alone: the reply dies in nf-in's zone;
# from-lport alone: even direct connections fail).
nbctl acl-del pg0
nbctl acl-add pg0 from-lport 1001 "inport == @pg0 && ip4" allow-related nfg0
nbctl pg-add pgnf nf-in nf-out
nbctl acl-add pgnf from-lport 100 "inport == @pgnf && ip" allow-stateless
nbctl acl-add pgnf to-lport 100 "outport == @pgnf && ip" allow-stateless
nbctl --wait=hv --timeout=30 sync
ovs-appctl -t "$dir/vswitchd.ctl" revalidator/purge
before=$(vnf_frames)
printf 'workaround, the function ports stateless, VIP:   '; stateless=$(connect 10.96.0.100 80); echo "$stateless"
echo "frames that crossed the VNF meanwhile: $(($(vnf_frames) - before))"
kill "$server" 2>/dev/null || true
echo "versions: $(ovn-northd --version | head -1); $(ovs-vswitchd --version | head -1)"
if [ "$direct" = connected ] && [ "$vip" != connected ] && [ "$plain" = connected ]; then
    echo "REPRODUCED: the load-balanced connection through the Network Function fails"
    exit 0
fi
echo "NOT REPRODUCED"
exit 1
