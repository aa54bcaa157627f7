"""Where each OVN/OVS distribution keeps its tools, schemas and share folders.

The sandbox runs two real distributions side by side:

- ``host``: the machine's own Debian packages (bookworm: OVN 23.03 + OVS 3.1), installed at ``/``.
  It has no Network Function tables: the router-policy backend and northd 23.03 run here.
- ``sid``: OVN 26.03 + OVS 4.0 from a Debian sid root file system that ``make setup``
  (``scripts/setup.sh``) builds once into a cache folder (:func:`sid_root`). It implements
  Network Function insertion, the product's default backend.

sid's binaries need sid's glibc, newer than the host's, so they run through sid's own dynamic
loader (``<root>/lib64/ld-linux-x86-64.so.2 --library-path ... <binary>``) rather than a chroot or
``LD_LIBRARY_PATH``. The loader runs the program in its own process, so the pid we start is the
daemon's pid; but every such daemon is named ``ld-linux-x86-64``: track pids, never look daemons up
by name. sid's binaries were built for the same ``/var/run/openvswitch``, ``/etc`` and
``/usr/share`` paths as the host's, so :meth:`Distribution.env` points every directory a daemon
may consult into the caller's work dir and the distribution's own share folders.

This is the only module that knows these paths: nothing else names ``usr/share/ovn`` or
``usr/lib/openvswitch-switch``. ``python -m osc_gitops_sandbox.ovn.distributions`` prints the
versions of both; ``... verify --root DIR`` is what ``make setup`` runs on a freshly built sid root.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DISTRIBUTION_NAMES",
    "HOST",
    "MINIMUM_VERSIONS",
    "OVN_TOOLS",
    "OVS_TOOLS",
    "SID",
    "SID_ROOT_ENV",
    "Distribution",
    "DistributionError",
    "distribution",
    "host",
    "sid",
    "sid_root",
    "write_wrappers",
]

HOST = "host"
SID = "sid"
DISTRIBUTION_NAMES = (HOST, SID)
SID_ROOT_ENV = "OSC_SID_ROOT"
"""Overrides where the sid root file system lives (default: see :func:`sid_root`)."""

STAMP_FILE = ".osc-gitops-stamp"
"""Written into the sid root by ``scripts/setup.sh`` once the root is complete and verified."""

# Paths relative to a distribution's root. ``usr/sbin/ovs-vswitchd`` is NOT used: Debian makes it
# an absolute symlink into /etc/alternatives, which from a sid root lands on the host's binary.
_TOOL_PATHS: Mapping[str, str] = {
    "ovsdb-server": "usr/sbin/ovsdb-server",
    "ovsdb-tool": "usr/bin/ovsdb-tool",
    "ovsdb-client": "usr/bin/ovsdb-client",
    "ovs-appctl": "usr/bin/ovs-appctl",
    "ovs-vsctl": "usr/bin/ovs-vsctl",
    "ovs-ofctl": "usr/bin/ovs-ofctl",
    "ovs-vswitchd": "usr/lib/openvswitch-switch/ovs-vswitchd",
    "ovn-northd": "usr/bin/ovn-northd",
    "ovn-controller": "usr/bin/ovn-controller",
    "ovn-nbctl": "usr/bin/ovn-nbctl",
    "ovn-sbctl": "usr/bin/ovn-sbctl",
    "ovn-appctl": "usr/bin/ovn-appctl",
    "ovn-trace": "usr/bin/ovn-trace",
}
OVS_TOOLS = ("ovsdb-server", "ovsdb-tool", "ovs-appctl", "ovs-vsctl", "ovs-vswitchd")
OVN_TOOLS = ("ovn-northd", "ovn-controller", "ovn-nbctl", "ovn-sbctl", "ovn-appctl")
_OVN_SHARE = "usr/share/ovn"
_OVS_SHARE = "usr/share/openvswitch"
_LOADER = "lib64/ld-linux-x86-64.so.2"
_LIBRARY_DIRS = ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu")

MINIMUM_VERSIONS: Mapping[str, Mapping[str, str]] = {
    HOST: {},
    SID: {"ovn": "26.03", "ovs": "3.5"},
}
"""What each distribution must at least ship (per family, every tool of it). sid is a moving
target: when a rebuild brings something older than this, ``make setup`` refuses at once instead
of letting tests fail later."""


class DistributionError(RuntimeError):
    """A distribution is missing, incomplete or too old; the message says how to fix it."""


def _cache_home() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg) if xdg else Path.home() / ".cache"


def sid_root() -> Path:
    """Where ``make setup`` puts the sid root: ``$OSC_SID_ROOT``, else
    ``${XDG_CACHE_HOME:-~/.cache}/osc-gitops/sid-ovn`` (shared by every clone on the machine;
    ``scripts/setup.sh`` uses the same rule)."""
    override = os.environ.get(SID_ROOT_ENV)
    if override:
        return Path(override)
    return _cache_home() / "osc-gitops" / "sid-ovn"


def version_number(text: str) -> str:
    """``"26.03.1"`` from ``ovn-northd 26.03.1`` (the first line of a ``--version``)."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    match = re.search(r"\d+\.\d+(?:\.\d+)?", first)
    if match is None:
        raise DistributionError(f"no version number in {first!r}")
    return match.group(0)


def version_key(version: str) -> tuple[int, ...]:
    """``(26, 3, 1)`` for ``"26.03.1"``: comparable, so ``"26.03" <= "26.03.1"``."""
    return tuple(int(part) for part in version.split("."))


@dataclass(frozen=True)
class Distribution:
    """One OVN + OVS installation: ``root`` holds ``usr/...`` as a Debian system lays it out.

    ``loader`` is set when the binaries must run through the root's own dynamic loader (sid on
    a bookworm host); ``None`` runs them directly.
    """

    name: str
    root: Path
    loader: Path | None = None

    # -- where things are ------------------------------------------------------------------------
    def path(self, tool: str) -> Path:
        """The real binary of ``tool`` (never a symlink that leaves the root)."""
        try:
            return self.root / _TOOL_PATHS[tool]
        except KeyError:
            raise DistributionError(f"unknown OVN/OVS tool {tool!r}") from None

    def command(self, tool: str) -> list[str]:
        """The argv prefix that runs ``tool``; the process started with it is the tool itself."""
        if self.loader is None:
            return [str(self.path(tool))]
        library_path = ":".join(str(self.root / d) for d in _LIBRARY_DIRS)
        return [str(self.loader), "--library-path", library_path, str(self.path(tool))]

    @property
    def ovn_share(self) -> Path:
        return self.root / _OVN_SHARE

    @property
    def ovs_share(self) -> Path:
        return self.root / _OVS_SHARE

    @property
    def nb_schema(self) -> Path:
        return self.ovn_share / "ovn-nb.ovsschema"

    @property
    def sb_schema(self) -> Path:
        return self.ovn_share / "ovn-sb.ovsschema"

    @property
    def vswitch_schema(self) -> Path:
        return self.ovs_share / "vswitch.ovsschema"

    @property
    def label(self) -> str:
        """Human name for messages, e.g. ``sid (OVN/OVS from /root/.cache/osc-gitops/sid-ovn)``."""
        return self.name if self.name == HOST else f"{self.name} (OVN/OVS from {self.root})"

    def env(
        self, workdir: str | os.PathLike[str], base: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """Environment for a daemon or tool of this distribution working in ``workdir``.

        Run, log, database and configuration directories all point at ``workdir`` so that
        nothing falls back to the host's ``/var/run/openvswitch`` or ``/etc/openvswitch``
        (daemons still get explicit ``--unixctl``/``--log-file``/``--remote`` as well); the
        package data directories point at this distribution's own share folders.
        """
        env = dict(os.environ if base is None else base)
        for prefix in ("OVS", "OVN"):
            for kind in ("RUNDIR", "LOGDIR", "DBDIR", "SYSCONFDIR"):
                env[f"{prefix}_{kind}"] = str(workdir)
        env["OVS_PKGDATADIR"] = str(self.ovs_share)
        env["OVN_PKGDATADIR"] = str(self.ovn_share)
        return env

    # -- is it usable ----------------------------------------------------------------------------
    def unavailable_reason(self, tools: Sequence[str] = ()) -> str | None:
        """Why this distribution cannot run ``tools`` here, or ``None`` if it can (cheap: looks
        at files only; :meth:`verify` runs the tools)."""
        if self.name == SID:
            fix = "run `make setup` (it builds the Debian sid root with OVN 26.03 + OVS 4.0)"
            if not (self.root / STAMP_FILE).exists():
                return f"OVN distribution {self.label} not found (no {STAMP_FILE}): {fix}"
        else:
            fix = "install Debian's ovn-central, ovn-host and openvswitch-switch (`make setup`)"
        wanted = [self.path(tool) for tool in tools] + [self.nb_schema, self.sb_schema]
        if self.loader is not None:
            wanted.append(self.loader)
        missing = [str(path) for path in wanted if not path.exists()]
        if missing:
            return f"OVN distribution {self.label}: {', '.join(missing)} missing: {fix}"
        return None

    def require(self, tools: Sequence[str] = ()) -> Distribution:
        """``self`` if it can run ``tools``; else a :class:`DistributionError` with the fix."""
        reason = self.unavailable_reason(tools)
        if reason:
            raise DistributionError(reason)
        return self

    def version(self, tool: str) -> str:
        """``tool --version`` run through this distribution's loader, e.g. ``"26.03.1"``."""
        argv = [*self.command(tool), "--version"]
        try:
            proc = subprocess.run(
                argv, capture_output=True, text=True, timeout=20, check=False,
                env=self.env(self.root / "tmp"),
            )  # fmt: skip
        except OSError as exc:
            raise DistributionError(f"{' '.join(argv)}: {exc}") from exc
        if proc.returncode != 0:
            raise DistributionError(
                f"{' '.join(argv)} failed (exit {proc.returncode}): {proc.stderr.strip()}"
            )
        return version_number(proc.stdout)

    def versions(self, tools: Sequence[str] = (*OVS_TOOLS, *OVN_TOOLS)) -> dict[str, str]:
        """Every tool's version, each asked separately: a symlink or a stale file in the root
        could otherwise hide a binary of another version."""
        return {tool: self.version(tool) for tool in tools}

    def verify(self) -> dict[str, str]:
        """Every tool and schema present, every tool runs and is new enough for this
        distribution (:data:`MINIMUM_VERSIONS`); returns the versions."""
        wanted = [self.path(t) for t in (*OVS_TOOLS, *OVN_TOOLS)]
        wanted += [self.nb_schema, self.sb_schema, self.vswitch_schema]
        if self.loader is not None:
            wanted.append(self.loader)
        missing = [str(path) for path in wanted if not path.exists()]
        if missing:
            raise DistributionError(f"{self.label}: missing {', '.join(missing)}")
        versions = self.versions()
        minimum = MINIMUM_VERSIONS.get(self.name, {})
        too_old = [
            f"{tool} {versions[tool]} (needs >= {minimum[family]})"
            for family, tools in (("ovs", OVS_TOOLS), ("ovn", OVN_TOOLS))
            if family in minimum
            for tool in tools
            if version_key(versions[tool]) < version_key(minimum[family])
        ]
        if too_old:
            raise DistributionError(
                f"{self.label} is too old: {'; '.join(too_old)}. Debian sid moves; the sandbox "
                f"needs OVN >= {minimum.get('ovn')} and OVS >= {minimum.get('ovs')}"
            )
        return versions


def host() -> Distribution:
    """The machine's own Debian OVN/OVS (bookworm: 23.03 + 3.1)."""
    return Distribution(HOST, Path("/"))


def sid(root: str | os.PathLike[str] | None = None) -> Distribution:
    """OVN 26.03 + OVS 4.0 from the Debian sid root (default :func:`sid_root`)."""
    base = Path(root) if root is not None else sid_root()
    return Distribution(SID, base, loader=base / _LOADER)


def distribution(spec: str | Distribution) -> Distribution:
    """``"host"`` or ``"sid"`` (or a :class:`Distribution`, returned as is)."""
    if isinstance(spec, Distribution):
        return spec
    if spec == HOST:
        return host()
    if spec == SID:
        return sid()
    raise DistributionError(f"unknown OVN distribution {spec!r}: use one of {DISTRIBUTION_NAMES}")


def write_wrappers(dist: Distribution, folder: str | os.PathLike[str]) -> dict[str, str]:
    """A shell script per tool in ``folder`` that ``exec``s it through the distribution's
    loader (the pid stays the tool's), so a script written for a plain installation (e.g. the
    reproductions in ``docs/upstream/``) runs this distribution with ``folder`` first on
    ``PATH``. Returns the environment such a script also needs: ``PATH`` and the schema
    folders (``OVN_SCHEMA_DIR``, ``OVS_SCHEMA_DIR``)."""
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    for tool in _TOOL_PATHS:
        script = path / tool
        quoted = " ".join("'" + part.replace("'", "'\\''") + "'" for part in dist.command(tool))
        script.write_text(f'#!/bin/sh\nexec {quoted} "$@"\n')
        script.chmod(0o755)
    return {
        "PATH": f"{path}{os.pathsep}{os.environ.get('PATH', '')}",
        "OVN_SCHEMA_DIR": str(dist.ovn_share),
        "OVS_SCHEMA_DIR": str(dist.ovs_share),
    }


def summary(versions: Mapping[str, str]) -> str:
    """``OVN 26.03.1 + OVS 4.0.0 (ovsdb-server 4.0.0, ...)`` for :meth:`Distribution.versions`."""
    each = ", ".join(f"{tool} {version}" for tool, version in versions.items())
    return f"OVN {versions['ovn-northd']} + OVS {versions['ovs-vswitchd']} ({each})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m osc_gitops_sandbox.ovn.distributions",
        description="Show or verify the OVN/OVS distributions the sandbox runs.",
    )
    sub = parser.add_subparsers(dest="command")
    verify = sub.add_parser("verify", help="check a sid root: every tool runs and is new enough")
    verify.add_argument("--root", help="the sid root to check (default: the cache folder)")
    sub.add_parser("show", help="print both distributions' versions (default)")
    wrappers = sub.add_parser(
        "wrappers", help="write a wrapper script per tool of the sid root into DIR (put it first "
        "on PATH to run a script such as docs/upstream/*.sh against it)",
    )  # fmt: skip
    wrappers.add_argument("dir")
    args = parser.parse_args(argv)
    try:
        if args.command == "verify":
            dist = sid(args.root)
            print(summary(dist.verify()))
            return 0
        if args.command == "wrappers":
            env = write_wrappers(sid(), args.dir)
            print(" ".join(f"{key}={value}" for key, value in env.items()))
            return 0
        for dist in (host(), sid()):
            reason = dist.unavailable_reason(("ovsdb-server",))
            print(f"{dist.label}: {reason or summary(dist.versions())}")
        return 0
    except DistributionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
