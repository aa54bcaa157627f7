#!/bin/bash
# OVN 26.03: a Network_Function health probe cannot cross a logical switch between the
# function's two ports.
#
# A service chain wired as ONE function (its in port a VLAN child port of the first VNF's NIC,
# its out port a child port of the last VNF's, the VNFs joined by a two-port "link" logical
# switch; see osc-gitops' reconciler/core/steering/chains.py) carries traffic correctly, but
# OVN can never find it healthy: the probe (an ICMP echo from svc_monitor_ip to
# svc_monitor_ip_dst, Ethernet destination svc_monitor_mac) leaves by the function's in port,
# crosses the first VNF and enters the link switch, whose ls_in_l2_lkup hands every frame to
# svc_monitor_mac to ovn-controller at priority 110
# (build_lswitch_destination_lookup_bmcast in northd.c: "eth.dst == $svc_monitor_mac && (tcp
# || icmp || icmp6)" -> handle_svc_check(inport)) on EVERY logical switch; ovn-controller finds
# no monitor for the link port ("handle service check: Service monitor not found for ICMP
# request") and drops it. The probe never reaches the second VNF. Traced below without a data
# path: the probe entering the link switch is punted, an ordinary frame is forwarded.
#
# Expected output (OVN 26.03.1):
#   probe:    handle_svc_check(inport)
#   ordinary: output to "lb"
#
# Needs OVN >= 26.03 (ovsdb-server, ovn-northd, ovn-nbctl, ovn-sbctl, ovn-trace): the system's,
# or a root file system holding them (OVN_ROOT=~/.cache/osc-gitops/sid-ovn). No root needed.
set -euo pipefail

ROOT=${OVN_ROOT:-}
W=$(mktemp -d /tmp/nfp-XXXXXX)
declare -A PATHS=(
  [ovsdb-server]=usr/sbin/ovsdb-server [ovsdb-tool]=usr/bin/ovsdb-tool
  [ovn-northd]=usr/bin/ovn-northd [ovn-nbctl]=usr/bin/ovn-nbctl [ovn-sbctl]=usr/bin/ovn-sbctl
  [ovn-trace]=usr/bin/ovn-trace
)
run() {
  local tool=$1; shift
  if [ -z "$ROOT" ]; then "$tool" "$@"; return; fi
  "$ROOT/lib64/ld-linux-x86-64.so.2" \
    --library-path "$ROOT/usr/lib/x86_64-linux-gnu:$ROOT/lib/x86_64-linux-gnu" \
    "$ROOT/${PATHS[$tool]}" "$@"
}
SHARE=${ROOT:+$ROOT}/usr/share
for p in OVS OVN; do for k in RUNDIR LOGDIR DBDIR SYSCONFDIR; do export ${p}_$k=$W; done; done
export OVS_PKGDATADIR=$SHARE/openvswitch OVN_PKGDATADIR=$SHARE/ovn
cleanup() {
  for pid in "$W"/*.pid; do [ -f "$pid" ] && kill "$(cat "$pid")" 2>/dev/null || true; done
  rm -rf "$W"
}
trap cleanup EXIT
for db in nb sb; do
  run ovsdb-tool create "$W/$db.db" "$SHARE/ovn/ovn-$db.ovsschema"
  run ovsdb-server "$W/$db.db" --remote="punix:$W/$db.sock" --unixctl="$W/$db.ctl" \
    --pidfile="$W/$db.pid" --log-file="$W/$db.log" --detach 2>/dev/null
done
run ovn-northd --ovnnb-db="unix:$W/nb.sock" --ovnsb-db="unix:$W/sb.sock" \
  --unixctl="$W/northd.ctl" --pidfile="$W/northd.pid" --log-file="$W/northd.log" --detach \
  2>/dev/null
nbctl() { run ovn-nbctl --db="unix:$W/nb.sock" "$@"; }

# Two VNF NICs each (a_in, a_out, b_in, b_out) on the node switch; the chain's function ports
# are their child ports with tag 101 (in: a_in.101, out: b_out.101); the link switch joins
# a_out.101 (la) and b_in.101 (lb).
nbctl ls-add node -- ls-add link \
  -- lsp-add node a_in -- lsp-add node a_out -- lsp-add node b_in -- lsp-add node b_out \
  -- lsp-add node fin a_in 101 -- lsp-add node fout b_out 101 \
  -- lsp-set-options fin is-nf=true nf-linked-port=fout receive_multicast=false \
  -- lsp-set-options fout is-nf=true nf-linked-port=fin receive_multicast=false \
  -- lsp-add link la a_out 101 -- lsp-add link lb b_in 101 \
  -- lsp-set-addresses la unknown -- lsp-set-addresses lb unknown \
  -- set NB_Global . options:svc_monitor_ip=169.254.254.1 \
     options:svc_monitor_ip_dst=169.254.254.2
uuid() { nbctl --bare --columns=_uuid find Logical_Switch_Port name="$1"; }
nbctl -- --id=@hc create Network_Function_Health_Check name=chain \
      options:interval=1 options:timeout=1 options:success_count=1 options:failure_count=2 \
  -- create Network_Function name=chain id=1 inport="$(uuid fin)" outport="$(uuid fout)" \
     health_check=@hc >/dev/null
nbctl --wait=sb sync
MAC=$(nbctl get NB_Global . options:svc_monitor_mac | tr -d '"')

trace() {  # trace ETH_DST: a probe-like ICMP echo entering the link switch from la
  run ovn-trace --db="unix:$W/sb.sock" --summary link \
    "inport == \"la\" && eth.src == 0a:00:00:00:00:01 && eth.dst == $1 && \
     ip4.src == 169.254.254.1 && ip4.dst == 169.254.254.2 && ip.ttl == 64 && \
     icmp4.type == 8 && icmp4.code == 0"
}
verdict() { grep -o 'handle_svc_check(inport)\|output to "lb"' | head -1; }
echo "probe:    $(trace "$MAC" | verdict)"
echo "ordinary: $(trace 0a:00:00:00:00:02 | verdict)"
