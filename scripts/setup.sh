#!/usr/bin/env bash
# Set up everything osc-gitops needs on a fresh Debian machine: OVN/OVS from Debian (real
# ovsdb-server, ovn-northd, ovn-controller, ovs-vswitchd for the sandbox and the data-path tests),
# a virtualenv with the package and its dev tools, and OVN 26.03 + OVS 4.0 from Debian sid (the
# Network Function backend; see "the Debian sid root" below). Idempotent and quiet when already
# done.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
APT_PACKAGES=(ovn-central ovn-host openvswitch-switch python3-openvswitch python3-venv iproute2 iputils-ping make
  mmdebstrap debian-archive-keyring prometheus)
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The packages start system services we do not use (the sandbox runs its own processes;
  # prometheus is installed for promtool only, and its server would take port 9090, the
  # default --metrics-addr).
  for svc in ovn-central ovn-host openvswitch-switch prometheus prometheus-node-exporter; do
    $SUDO systemctl stop "$svc" >/dev/null 2>&1 || $SUDO service "$svc" stop >/dev/null 2>&1 || true
    $SUDO systemctl disable "$svc" >/dev/null 2>&1 || true
  done
fi

# Debian's interpreter + --system-site-packages: the venv sees python3-openvswitch's C JSON
# parser, which makes the ovsdb IDL 1.3-2x faster than PyPI's pure-Python build.
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV" >&2
  /usr/bin/python3 -m venv --system-site-packages "$VENV"
fi
stamp="$VENV/.osc-installed"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ sandbox/pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing osc-gitops and its dev tools into $VENV" >&2
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -e '.[dev]'
  # The sandbox (API emulator, local OVN stacks, demo) is a distribution of its own: the
  # product's wheel never contains it.
  "$VENV/bin/python" -m pip install -q --no-deps -e ./sandbox
  touch "$stamp"
fi

# --- the Debian sid roots ------------------------------------------------------------------------
# Debian bookworm ships OVN 23.03, which has no Network Function tables; Debian sid ships OVN 26.03
# and OVS 4.0. mmdebstrap builds a sid root file system (no chroot needed afterwards: the sandbox
# runs its binaries through sid's own dynamic loader, see sandbox/osc_gitops_sandbox/ovn/
# distributions.py, which also owns every path inside it).
#
# Where: ${OSC_SID_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/osc-gitops/sid-ovn}, outside the clone,
# so every clone and work tree on the machine shares one copy (distributions.sid_root() reads
# the same variables). Built once: the root holds a stamp with the recipe and the versions found,
# and a changed recipe rebuilds it. Atomic: built and verified in a temp folder beside it, then
# renamed into place; a failed or refused build leaves the previous root untouched. A lock keeps
# two concurrent `make setup` runs from building it twice.
#
# A second root, built the same way, holds Suricata 8 (Debian sid's suricata; bookworm has none):
# the sandbox's inspecting VNF guest (sandbox/osc_gitops_sandbox/datapath/suricata.py, which owns
# its paths and checks its version). A root of its own, so that neither recipe ever changes the
# other's: every work tree shares both.
SID_ROOT=${OSC_SID_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/osc-gitops/sid-ovn}
SID_PACKAGES=ovn-central,ovn-host,openvswitch-switch
SID_RECIPE="variant=essential packages=$SID_PACKAGES excludes=doc,man,info,locale"
SURICATA_ROOT=${OSC_SURICATA_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/osc-gitops/sid-suricata}
SURICATA_PACKAGES=suricata
SURICATA_RECIPE="variant=essential packages=$SURICATA_PACKAGES excludes=doc,man,info,locale"

# root_current ROOT RECIPE: the root exists, complete, built from RECIPE.
root_current() {
  [ -f "$1/.osc-gitops-stamp" ] && [ "$(head -n 1 "$1/.osc-gitops-stamp")" = "recipe: $2" ]
}

# The Debian mirror apt already uses for this machine's release (sources.list or deb822
# *.sources); sid is taken from the same place. $OSC_DEBIAN_MIRROR overrides it (needed on a
# machine that is not Debian, whose apt sources hold no Debian mirror).
debian_mirror() {
  local codename
  if [ -n "${OSC_DEBIAN_MIRROR:-}" ]; then
    echo "$OSC_DEBIAN_MIRROR"
    return
  fi
  [ "$(. /etc/os-release && echo "${ID:-}")" = debian ] || return 0
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  {
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
      [ -f "$f" ] || continue
      awk -v codename="$codename" '
        $1 == "deb" {
          i = 2
          if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
          if ($(i + 1) == codename) print $i
        }' "$f"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
      [ -f "$f" ] || continue
      awk -v codename="$codename" '
        BEGIN { RS = ""; FS = "\n" }
        {
          delete field; key = ""
          for (i = 1; i <= NF; i++) {
            line = $i
            if (line ~ /^#/) continue
            if (line ~ /^[ \t]/ && key != "") { field[key] = field[key] " " line; continue }
            p = index(line, ":"); if (!p) continue
            key = tolower(substr(line, 1, p - 1)); field[key] = substr(line, p + 1)
          }
          if (tolower(field["enabled"]) ~ /no/) next
          if (field["types"] !~ /(^|[ \t])deb([ \t]|$)/) next
          n = split(field["suites"], suites, /[ \t]+/); wanted = 0
          for (j = 1; j <= n; j++) if (suites[j] == codename) wanted = 1
          if (!wanted) next
          n = split(field["uris"], uris, /[ \t]+/)
          for (j = 1; j <= n; j++) if (uris[j] != "") { print uris[j]; next }
        }' "$f"
    done
  } | head -n 1
}

# build_root ROOT RECIPE PACKAGES NAME WHAT VERIFY: mmdebstrap PACKAGES from sid into a temp
# folder beside ROOT (.NAME.build.*), verify it with `python -m VERIFY verify --root DIR` (which
# prints the versions for the stamp, or refuses), stamp it with RECIPE and rename it into place.
build_root() {
  local root=$1 recipe=$2 packages=$3 name=$4 what=$5 verify=$6
  local parent mirror tmp versions started
  parent=$(dirname "$root")
  mkdir -p "$parent"
  mirror=$(debian_mirror)
  if [ -z "$mirror" ]; then
    echo "setup: cannot tell which Debian mirror to build the Debian sid root from: this is not" \
      "Debian, or no 'deb' source for this release is in /etc/apt/sources.list(.d); set" \
      "OSC_DEBIAN_MIRROR to a Debian mirror URL" >&2
    exit 1
  fi
  tmp=$(mktemp -d "$parent/.$name.build.XXXXXX")
  # --one-file-system: never follow a mount mmdebstrap might have left inside the tree.
  trap '$SUDO rm -rf --one-file-system "$tmp" "$tmp.old" "$tmp.log"' EXIT
  echo "setup: building the Debian sid root ($what) in $root" >&2
  started=$SECONDS
  # Check-Valid-Until: a mirror's sid Release file can be past its Valid-Until date (mirrors
  # that serve a frozen snapshot); apt would refuse it.
  if ! $SUDO mmdebstrap --quiet --variant=essential \
      --aptopt='Acquire::Check-Valid-Until "false"' \
      --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
      --dpkgopt='path-exclude=/usr/share/info/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
      --include="$packages" sid "$tmp" "$mirror" >"$tmp.log" 2>&1; then
    echo "setup: mmdebstrap failed building the Debian sid root ($what); its log:" >&2
    tail -n 20 "$tmp.log" >&2
    rm -f "$tmp.log"
    exit 1
  fi
  rm -f "$tmp.log"
  # Every tool, run through sid's loader, must answer --version and be of the version wanted.
  if ! versions=$("$VENV/bin/python" -m "$verify" verify --root "$tmp"); then
    echo "setup: refusing the Debian sid root ($what; see above); the previous one, if any," \
      "is kept" >&2
    exit 1
  fi
  printf 'recipe: %s\nbuilt: %s\nversions: %s\n' "$recipe" "$(date -u +%FT%TZ)" "$versions" \
    | $SUDO tee "$tmp/.osc-gitops-stamp" >/dev/null
  if [ -e "$root" ]; then $SUDO mv -T "$root" "$tmp.old"; fi
  $SUDO mv -T "$tmp" "$root"
  $SUDO rm -rf --one-file-system "$tmp.old"
  trap - EXIT
  echo "setup: Debian sid root ready in $((SECONDS - started)) s: $versions" >&2
}

# ensure_root ROOT RECIPE PACKAGES NAME WHAT VERIFY: build_root unless the root is current, under
# the lock .NAME.lock beside it (a second `make setup` waits, then finds it built).
ensure_root() {
  if ! root_current "$1" "$2"; then
    mkdir -p "$(dirname "$1")"
    exec 9>"$(dirname "$1")/.$4.lock"
    flock 9
    root_current "$1" "$2" || build_root "$@"
    exec 9>&-
  fi
}

ensure_root "$SID_ROOT" "$SID_RECIPE" "$SID_PACKAGES" sid-ovn "OVN 26.03, OVS 4.0" \
  osc_gitops_sandbox.ovn.distributions
ensure_root "$SURICATA_ROOT" "$SURICATA_RECIPE" "$SURICATA_PACKAGES" sid-suricata "Suricata 8.0" \
  osc_gitops_sandbox.datapath.suricata
