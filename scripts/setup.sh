#!/usr/bin/env bash
# Set up everything osc-gitops needs on a fresh Debian machine: OVN/OVS from Debian (real
# ovsdb-server, ovn-northd, ovn-controller, ovs-vswitchd for the sandbox and the data-path tests)
# and a virtualenv with the package and its dev tools. Idempotent and quiet when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
APT_PACKAGES=(ovn-central ovn-host openvswitch-switch python3-openvswitch python3-venv iproute2 make)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing Debian packages: ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The packages start system services we do not use (the sandbox runs its own processes).
  for svc in ovn-central ovn-host openvswitch-switch; do
    $SUDO systemctl stop "$svc" >/dev/null 2>&1 || $SUDO service "$svc" stop >/dev/null 2>&1 || true
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
