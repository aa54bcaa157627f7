#!/bin/bash
# OVN 26.03: two Network_Functions chained with ACLs lose one of them on routed replies.
#
# After a from-lport ACL sends a packet from pod p1 into function A (a bump in the wire), the
# packet re-enters the switch from A's out port; a to-lport ACL matching `inport == "a-out"`
# then sends it into function B. Between two pods of one switch (p1 -> p3) both functions see
# the requests and the replies. Towards another switch through the router (p1 -> p2) B sees the
# requests only: the reply comes back through A alone. OVN keeps a connection's function in
# ct_label.nf_id of the conntrack zone of the port where the ACL matched: A's in p1's zone, B's
# in the zone of the egress port, which for routed traffic is the router port, and router ports
# skip conntrack (skip_port_from_conntrack in northd.c), so the reply finds no nf_id for B.
# (A third function cannot be chained at all: in_nf skips redirection for packets from any
# function port, and out_pre_acl skips the egress ACLs for packets from a function's in port.)
#
# Expected output (OVN 26.03.1, OVS 4.0 userspace datapath):
#   same switch p1 -> p3: 3/3 replies; frames through A: 6, through B: 6
#   routed      p1 -> p2: 3/3 replies; frames through A: 6, through B: 3   <- B misses the replies
#
# Runs as root on a machine with iproute2 and OVN >= 26.03 + OVS: the system's, or a root file
# system holding them (OVN_ROOT=~/.cache/osc-gitops/sid-ovn: Debian sid's, run through its own
# loader, as osc-gitops' sandbox does). Everything lives in a temp dir and netns "nfc-*"; all of
# it is removed on exit. No osc-gitops code is involved.
set -euo pipefail

ROOT=${OVN_ROOT:-}
W=$(mktemp -d /tmp/nfc-XXXXXX)
declare -A PATHS=(
  [ovsdb-server]=usr/sbin/ovsdb-server [ovsdb-tool]=usr/bin/ovsdb-tool
  [ovs-vsctl]=usr/bin/ovs-vsctl [ovs-vswitchd]=usr/lib/openvswitch-switch/ovs-vswitchd
  [ovs-appctl]=usr/bin/ovs-appctl [ovn-northd]=usr/bin/ovn-northd
  [ovn-controller]=usr/bin/ovn-controller [ovn-nbctl]=usr/bin/ovn-nbctl
)
run() {  # run TOOL ARGS...: the system's tool, or OVN_ROOT's through its loader
  local tool=$1; shift
  if [ -z "$ROOT" ]; then "$tool" "$@"; return; fi
  "$ROOT/lib64/ld-linux-x86-64.so.2" \
    --library-path "$ROOT/usr/lib/x86_64-linux-gnu:$ROOT/lib/x86_64-linux-gnu" \
    "$ROOT/${PATHS[$tool]}" "$@"
}
SHARE=${ROOT:+$ROOT}/usr/share
for p in OVS OVN; do for k in RUNDIR LOGDIR DBDIR SYSCONFDIR; do export ${p}_$k=$W; done; done
export OVS_PKGDATADIR=$SHARE/openvswitch OVN_PKGDATADIR=$SHARE/ovn
NS=(nfc-ovs nfc-p1 nfc-p2 nfc-p3 nfc-va nfc-vb)

cleanup() {
  for pid in "$W"/*.pid; do [ -f "$pid" ] && kill "$(cat "$pid")" 2>/dev/null || true; done
  for ns in "${NS[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$W"
}
trap cleanup EXIT

db() {  # db NAME SCHEMA: an ovsdb-server on unix:$W/NAME.sock
  run ovsdb-tool create "$W/$1.db" "$2"
  run ovsdb-server "$W/$1.db" --remote="punix:$W/$1.sock" --unixctl="$W/$1.ctl" \
    --pidfile="$W/$1.pid" --log-file="$W/$1.log" --detach 2>/dev/null
}
db nb "$SHARE/ovn/ovn-nb.ovsschema"
db sb "$SHARE/ovn/ovn-sb.ovsschema"
db conf "$SHARE/openvswitch/vswitch.ovsschema"
run ovn-northd --ovnnb-db="unix:$W/nb.sock" --ovnsb-db="unix:$W/sb.sock" \
  --unixctl="$W/northd.ctl" --pidfile="$W/northd.pid" --log-file="$W/northd.log" --detach \
  2>/dev/null
nbctl() { run ovn-nbctl --db="unix:$W/nb.sock" "$@"; }
vsctl() { run ovs-vsctl --db="unix:$W/conf.sock" "$@"; }

# The switch: ovs-vswitchd with the userspace datapath, in a netns of its own.
for ns in "${NS[@]}"; do ip netns add "$ns"; done
ip netns exec nfc-ovs ip link set lo up
vsctl --no-wait init
vsctl --no-wait set Open_vSwitch . external_ids:system-id=chassis-1 \
  external_ids:ovn-remote="unix:$W/sb.sock" external_ids:ovn-encap-type=geneve \
  external_ids:ovn-encap-ip=127.0.0.1 external_ids:ovn-bridge-datapath-type=netdev
( export ROOT; ip netns exec nfc-ovs bash -c "$(declare -f run); $(declare -p PATHS ROOT); \
  run ovs-vswitchd unix:$W/conf.sock --pidfile=$W/vswitchd.pid --log-file=$W/vswitchd.log \
  --unixctl=$W/vswitchd.ctl --disable-system --detach" 2>/dev/null )
vsctl add-br br-int -- set bridge br-int datapath_type=netdev fail-mode=secure
run ovn-controller "unix:$W/conf.sock" --pidfile="$W/controller.pid" \
  --log-file="$W/controller.log" --unixctl="$W/controller.ctl" --detach 2>/dev/null

# Logical topology: ls1 (p1, p3, functions A and B) -- lr -- ls2 (p2).
nbctl ls-add ls1 -- ls-add ls2 -- lr-add lr \
  -- lrp-add lr lr-ls1 00:00:00:00:01:01 10.0.1.1/24 \
  -- lrp-add lr lr-ls2 00:00:00:00:02:01 10.0.2.1/24 \
  -- lsp-add ls1 ls1-lr -- lsp-set-type ls1-lr router -- lsp-set-addresses ls1-lr router \
  -- lsp-set-options ls1-lr router-port=lr-ls1 \
  -- lsp-add ls2 ls2-lr -- lsp-set-type ls2-lr router -- lsp-set-addresses ls2-lr router \
  -- lsp-set-options ls2-lr router-port=lr-ls2 \
  -- lsp-add ls1 p1 -- lsp-set-addresses p1 "00:00:00:00:01:0a 10.0.1.10" \
  -- lsp-add ls1 p3 -- lsp-set-addresses p3 "00:00:00:00:01:0c 10.0.1.12" \
  -- lsp-add ls2 p2 -- lsp-set-addresses p2 "00:00:00:00:02:0a 10.0.2.10"
for f in a b; do
  nbctl lsp-add ls1 $f-in -- lsp-add ls1 $f-out \
    -- lsp-set-options $f-in is-nf=true nf-linked-port=$f-out receive_multicast=false lsp_learn_fdb=false \
    -- lsp-set-options $f-out is-nf=true nf-linked-port=$f-in receive_multicast=false lsp_learn_fdb=false
done
nbctl nf-add nfa 1 a-in a-out -- nf-add nfb 2 b-in b-out \
  -- nfg-add ga 1 inline nfa -- nfg-add gb 2 inline nfb \
  -- pg-add pg p1 \
  -- --type=port-group acl-add pg from-lport 1000 'inport == @pg && ip4' allow-related ga \
  -- --type=port-group acl-add pg to-lport 1001 'inport == "a-out" && ip4' allow-related gb

# Pods and the two bump-in-the-wire functions, as network namespaces on veths.
plug() {  # plug NS IFNAME LSP [MAC IP GW]
  local ns=$1 ifname=$2 lsp=$3 host=${3}-h
  ip link add "$host" type veth peer name "$ifname" netns "$ns"
  ip link set "$host" netns nfc-ovs
  ip netns exec nfc-ovs ip link set "$host" up
  vsctl add-port br-int "$host" -- set interface "$host" external_ids:iface-id="$lsp"
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  ip -n "$ns" link set "$ifname" up
  if [ $# -gt 3 ]; then
    ip -n "$ns" link set "$ifname" address "$4"
    ip -n "$ns" addr add "$5/24" dev "$ifname"
    ip -n "$ns" route add default via "$6"
  fi
}
plug nfc-p1 eth0 p1 00:00:00:00:01:0a 10.0.1.10 10.0.1.1
plug nfc-p3 eth0 p3 00:00:00:00:01:0c 10.0.1.12 10.0.1.1
plug nfc-p2 eth0 p2 00:00:00:00:02:0a 10.0.2.10 10.0.2.1
for f in a b; do
  plug nfc-v$f in $f-in
  plug nfc-v$f out $f-out
  ip -n nfc-v$f link add br0 type bridge stp_state 0 mcast_snooping 0
  for nic in in out; do
    ip -n nfc-v$f link set $nic master br0
    ip -n nfc-v$f link set $nic type bridge_slave learning off
  done
  ip -n nfc-v$f link set br0 up
  # Count the IPv4 frames the guest sends out of its two NICs (ARP is not steered; a NIC's own
  # counters would count it too): a packet socket per NIC, the total kept in a file.
  ip netns exec nfc-v$f python3 - "$W/frames-$f" <<'PY' &
import select, socket, sys
socks = []
for nic in ("in", "out"):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.bind((nic, 0x0003))
    socks.append(s)
total = 0
open(sys.argv[1], "w").write("0")
while True:
    for s in select.select(socks, [], [])[0]:
        frame, addr = s.recvfrom(65535)
        if addr[2] == socket.PACKET_OUTGOING and frame[12:14] == b"\x08\x00":
            total += 1
            open(sys.argv[1], "w").write(str(total))
PY
  echo $! > "$W/counter-$f.pid"
done
for lsp in p1 p2 p3 a-in a-out b-in b-out; do
  nbctl --timeout=30 wait-until Logical_Switch_Port $lsp up=true
done
nbctl --wait=hv --timeout=30 sync

frames() {  # frames F: the IPv4 frames function F's guest sent out of its two NICs so far
  cat "$W/frames-$1"
}
ping3() {  # ping3 NS IP: replies to 3 echo requests (ping, or a few lines of Python without it)
  if command -v ping >/dev/null; then
    ip netns exec "$1" ping -c 3 -i 0.2 -W 1 "$2" | awk '/received/ {print $4}'
    return
  fi
  ip netns exec "$1" python3 - "$2" <<'PY'
import os, select, socket, struct, sys
def csum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF); s += s >> 16
    return ~s & 0xFFFF
sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
ident, got = os.getpid() & 0xFFFF, 0
for seq in range(3):
    head = struct.pack("!BBHHH", 8, 0, 0, ident, seq) + b"x" * 32
    sock.sendto(head[:2] + struct.pack("!H", csum(head)) + head[4:], (sys.argv[1], 0))
    while select.select([sock], [], [], 1.0)[0]:
        data = sock.recv(2048)
        kind, _, _, rid, rseq = struct.unpack("!BBHHH", data[20:28])
        if kind == 0 and rid == ident and rseq == seq:
            got += 1
            break
print(got)
PY
}
probe() {  # probe LABEL SRC DST_IP
  local a0 b0 replies
  a0=$(frames a); b0=$(frames b)
  replies=$(ping3 "$2" "$3")
  sleep 0.5
  echo "$1: $replies/3 replies; frames through A: $(( $(frames a) - a0 )), through B: $(( $(frames b) - b0 ))"
}
ping3 nfc-p1 10.0.2.10 >/dev/null  # ARP for the router first
probe "same switch p1 -> p3" nfc-p1 10.0.1.12
probe "routed      p1 -> p2" nfc-p1 10.0.2.10
