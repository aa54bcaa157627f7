"""Suricata 8 inline in a VNF guest: the sandbox's inspecting VNF.

The bridge guest (:mod:`osc_gitops_sandbox.datapath.guests`) proves the steering but inspects
nothing. A *Suricata guest* runs Debian sid's Suricata 8.0 between its two data NICs instead of
a Linux bridge, in IPS mode: af-packet reads every frame of ``data-in`` and writes it out of
``data-out``, and the reverse (the pod-side interfaces KubeVirt names ``pod<hash>``; ``eth0``
and ``eth1`` by default), unless a rule drops it (``copy-mode: ips``,
``copy-iface`` the other NIC, one entry per direction with its own ``cluster-id``). Headers are
not changed, so OVN sees the bump in the wire it expects, and OVN's health probe crosses it like
any other frame.

**Which rules let OVN's health probe pass.** The probe is an ICMP echo request from
``svc_monitor_ip`` to ``svc_monitor_ip_dst`` (link-local by default) that ovn-controller sends
into the function's in port and expects back on its out port. Suricata forwards whatever no rule
drops, so a rule file without a ``drop``/``reject`` that matches ICMP between link-local addresses
lets it pass. A policy that drops broadly (``drop ip any any -> any any``) must keep the probe
out of it with a ``pass`` rule, which Suricata applies before any ``drop`` (its default
``action-order``): :data:`HEALTH_PROBE_PASS` (in :data:`DEFAULT_RULES`). Without it OVN counts
the guest dead and the Bindings' failure policy acts, whatever the guest passes otherwise.

**No Suricata, no forwarding.** Nothing but Suricata copies frames between the NICs: a guest
whose Suricata is stopped, crashed, failed to start (a bad rule file) or failed to reload (the
guest stops it then: a VNF whose policy could not be applied does not pass traffic) forwards
nothing, so OVN's health check fails and ``fail-close``/``fail-open`` act. The guest reports
it: :attr:`SuricataProgram.failure` (the exit code and the end of Suricata's log), and the
sandbox's security manager serves it (:mod:`osc_gitops_sandbox.datapath.security_manager`).

**Address groups from the security manager.** The guest's ``suricata.yaml`` holds the address
groups its rules use: ``$PROTECTED`` (every member of every security group steered through this
VNF on this node) and ``$SG_<GROUP>`` per security group (``web`` -> ``$SG_WEB``), written from
the members the reconciler notifies (``securityManager``). A change is applied without a
restart: the guest writes the file and asks Suricata to ``reload-rules`` over its unix socket
with ``suricatasc`` (Suricata re-reads the YAML, vars included, and swaps its detection engine
while packets keep flowing), then checks with ``ruleset-reload-time`` that the reload took. A
group without members holds :data:`NO_MEMBER` (Suricata refuses an empty group).

**Where Suricata comes from.** ``make setup`` builds a second Debian sid root beside the OVN one
(``${XDG_CACHE_HOME:-~/.cache}/osc-gitops/sid-suricata``, ``$OSC_SURICATA_ROOT``; recipe and
versions in its stamp; ``scripts/setup.sh``) and refuses one whose Suricata is not 8.0.x
(:data:`SERIES`): ``python -m osc_gitops_sandbox.datapath.suricata verify --root DIR``. Its
binaries run through sid's own loader, as the OVN ones do
(:mod:`osc_gitops_sandbox.ovn.distributions`): ``DIR/lib64/ld-linux-x86-64.so.2 --library-path
... DIR/usr/bin/suricata``; the process started is Suricata itself (tracked by pid).

**Checksum offload is off** on every veth of the path (the guest's NICs included: the data path
turns it off on every NIC it plugs): with it on, af-packet copies segments whose TCP checksum is
still to be filled in, the peer counts ``TcpInCsumErrors`` and connections never open while ping
works. ``-k none`` keeps Suricata from judging checksums itself.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

from osc_gitops_sandbox.datapath.netns import DatapathError
from osc_gitops_sandbox.ovn.processes import Daemon, seconds_until, tail

__all__ = [
    "DEFAULT_RULES",
    "HEALTH_PROBE_PASS",
    "IMAGE_WORD",
    "NO_MEMBER",
    "SERIES",
    "SURICATA_ROOT_ENV",
    "SuricataError",
    "SuricataProgram",
    "SuricataPrograms",
    "SuricataRoot",
    "group_variable",
    "is_suricata_image",
    "render_config",
    "suricata_root",
]

SURICATA_ROOT_ENV = "OSC_SURICATA_ROOT"
"""Overrides where the Suricata root lives (default: see :func:`suricata_root`)."""
STAMP_FILE = ".osc-gitops-stamp"
SERIES = "8.0"
"""The Suricata release series the sandbox is written for (the af-packet IPS settings, the unix
socket commands, eve.json's fields): ``make setup`` refuses a root with another one."""
_LOADER = "lib64/ld-linux-x86-64.so.2"
_LIBRARY_DIRS = ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu")
_TOOLS = {"suricata": "usr/bin/suricata", "suricatasc": "usr/bin/suricatasc"}

IMAGE_WORD = "suricata"
"""A VM whose containerDisk image's repository name contains this word boots a Suricata guest
(``quay.io/example/vnf-suricata:8.0.7``); every other image a Linux bridge."""
NO_MEMBER = "192.0.2.255"
"""What an address group without members holds: an address of TEST-NET-1 (RFC 5737, for
documentation only), which no pod has. Suricata refuses an empty group."""
PROTECTED = "PROTECTED"
"""The address group of every member steered through the VNF on the node."""
HEALTH_PROBE = "OVN_HEALTH_PROBE"
"""The address group of OVN's health-probe addresses (``svc_monitor_ip``, ``_dst``)."""
HEALTH_PROBE_NETWORK = "169.254.0.0/16"
"""Where ``svc_monitor_ip`` and ``svc_monitor_ip_dst`` live by default (link-local)."""

HEALTH_PROBE_PASS = (
    f'pass icmp ${HEALTH_PROBE} any -> ${HEALTH_PROBE} any (msg:"OVN Network_Function health '
    'probe"; itype:8; sid:1000000; rev:1;)'
)
"""Lets OVN's health probe through whatever the rules after it drop (``pass`` wins)."""
ATTACK_SID = 1000001
DEFAULT_RULES = "\n".join([
    "# osc-gitops sandbox: the rules a Suricata guest is given unless told otherwise.",
    "# OVN's health probe (ICMP echo between link-local addresses): never dropped.",
    HEALTH_PROBE_PASS,
    "# A shell-command injection in an HTTP request to a protected pod (a member of a security",
    "# group steered through this VNF, pushed by the security manager): dropped.",
    f'drop http any any -> ${PROTECTED} any (msg:"OSC sandbox: command injection in an HTTP '
    'request to a protected pod"; flow:established,to_server; http.uri; content:"/cgi-bin/"; '
    f'content:"|3B|cat /etc/passwd"; classtype:web-application-attack; sid:{ATTACK_SID}; '
    "rev:1;)",
    "",
])  # fmt: skip
"""The guest's rule file by default. The attack: ``GET /cgi-bin/status?host=x;cat
/etc/passwd`` (``%3B`` in the URL; ``http.uri`` is the normalised URI)."""

READY_LINE = "Engine started."
"""What Suricata logs (notice level) once its capture threads run."""


class SuricataError(DatapathError):
    """Suricata could not be found, started or reloaded; the message ends with its log."""


def _cache_home() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg) if xdg else Path.home() / ".cache"


def suricata_root() -> Path:
    """``$OSC_SURICATA_ROOT``, else ``${XDG_CACHE_HOME:-~/.cache}/osc-gitops/sid-suricata``
    (``scripts/setup.sh`` uses the same rule)."""
    override = os.environ.get(SURICATA_ROOT_ENV)
    return Path(override) if override else _cache_home() / "osc-gitops" / "sid-suricata"


def is_suricata_image(image: str) -> bool:
    """Whether a containerDisk ``image`` boots a Suricata guest (see :data:`IMAGE_WORD`)."""
    repository = image.rsplit("@", 1)[0]
    name = repository.rsplit("/", 1)[-1].split(":", 1)[0]
    return IMAGE_WORD in name.lower()


def group_variable(group: str) -> str:
    """The Suricata address group of SecurityGroup ``group``: ``web`` -> ``SG_WEB``
    (``shop.db-1`` -> ``SG_SHOP_DB_1``)."""
    return "SG_" + re.sub(r"[^A-Za-z0-9]", "_", group).upper()


@dataclass(frozen=True)
class SuricataRoot:
    """The Debian sid root with Suricata, its binaries run through the root's loader."""

    root: Path

    @property
    def loader(self) -> Path:
        return self.root / _LOADER

    def command(self, tool: str) -> list[str]:
        """The argv prefix that runs ``tool`` (``suricata``, ``suricatasc``) from the root."""
        library_path = ":".join(str(self.root / d) for d in _LIBRARY_DIRS)
        return [str(self.loader), "--library-path", library_path, str(self.root / _TOOLS[tool])]

    @property
    def config_dir(self) -> Path:
        """``etc/suricata``: classification and reference files."""
        return self.root / "etc" / "suricata"

    def unavailable_reason(self) -> str | None:
        """Why no Suricata guest can run from this root (cheap: files only), or ``None``."""
        fix = "run `make setup` (it builds the Debian sid root with Suricata 8.0)"
        if not (self.root / STAMP_FILE).exists():
            return f"Suricata root {self.root} not found (no {STAMP_FILE}): {fix}"
        wanted = [self.loader, *(self.root / p for p in _TOOLS.values())]
        missing = [str(p) for p in wanted if not p.exists()]
        if missing:
            return f"Suricata root {self.root}: {', '.join(missing)} missing: {fix}"
        return None

    def version(self) -> str:
        """``suricata -V`` through the root's loader: ``"8.0.7"``."""
        argv = [*self.command("suricata"), "-V"]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
        except OSError as exc:
            raise SuricataError(f"{' '.join(argv)}: {exc}") from exc
        match = re.search(r"version (\d+\.\d+\.\d+)", proc.stdout)
        if proc.returncode != 0 or match is None:
            raise SuricataError(
                f"{' '.join(argv)} failed (exit {proc.returncode}): "
                f"{(proc.stderr or proc.stdout).strip()}"
            )
        return match.group(1)

    def verify(self) -> str:
        """Both tools present and running, Suricata of the :data:`SERIES`; returns the stamp's
        version line."""
        missing = [str(self.root / p) for p in _TOOLS.values() if not (self.root / p).exists()]
        if missing or not self.loader.exists():
            raise SuricataError(
                f"Suricata root {self.root}: missing {', '.join(missing) or _LOADER}"
            )
        version = self.version()
        if version.rsplit(".", 1)[0] != SERIES:
            raise SuricataError(
                f"Suricata root {self.root} holds Suricata {version}, the sandbox is written for "
                f"{SERIES}.x (af-packet IPS settings, unix-socket commands, eve.json): Debian sid "
                "moved on; review datapath/suricata.py before accepting it"
            )
        argv = [*self.command("suricatasc"), "--help"]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
        if proc.returncode != 0 or "--command" not in proc.stdout:
            raise SuricataError(f"{' '.join(argv)} failed (exit {proc.returncode})")
        return f"Suricata {version} (suricata {version}, suricatasc)"


def root() -> SuricataRoot:
    return SuricataRoot(suricata_root())


# ---------------------------------------------------------------------------------------------
# the guest's configuration


def _yaml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a YAML double-quoted scalar


def address_group(addresses: Sequence[str]) -> str:
    """``[a,b]``, or ``[NO_MEMBER]`` for no address."""
    return "[" + ",".join(sorted(set(addresses)) or [NO_MEMBER]) + "]"


def render_config(
    workdir: Path, config_dir: Path, groups: Mapping[str, Sequence[str]], *,
    in_if: str = "eth0", out_if: str = "eth1",
) -> str:  # fmt: skip
    """The guest's ``suricata.yaml``: IPS between ``in_if`` and ``out_if``, the rules in
    ``workdir/local.rules``, eve.json alerts and drops, the unix socket, and the address
    groups: ``groups`` (name -> addresses) plus ``PROTECTED`` (all of them) and the health
    probe's, ``HOME_NET``/``EXTERNAL_NET`` for rules that use them."""
    everyone = sorted({a for addresses in groups.values() for a in addresses})
    variables = {
        PROTECTED: address_group(everyone),
        HEALTH_PROBE: f"[{HEALTH_PROBE_NETWORK}]",
        "HOME_NET": "[10.0.0.0/8,172.16.0.0/12,192.168.0.0/16]",
        "EXTERNAL_NET": "any",
        **{name: address_group(addresses) for name, addresses in sorted(groups.items())},
    }
    lines = [
        "%YAML 1.1",
        "---",
        "# Written by the osc-gitops sandbox (datapath/suricata.py); address groups from the",
        "# security manager. Reloaded with `suricatasc -c reload-rules` on every change.",
        "vars:",
        "  address-groups:",
        *(f"    {name}: {_yaml_string(value)}" for name, value in variables.items()),
        "  port-groups:",
        '    HTTP_PORTS: "[80,8000:8090]"',
        f"default-log-dir: {_yaml_string(str(workdir))}",
        f"default-rule-path: {_yaml_string(str(workdir))}",
        "rule-files: [local.rules]",
        f"classification-file: {_yaml_string(str(config_dir / 'classification.config'))}",
        f"reference-config-file: {_yaml_string(str(config_dir / 'reference.config'))}",
        f"threshold-file: {_yaml_string(str(workdir / 'threshold.config'))}",
        "engine:",
        "  init-failure-fatal: yes      # a bad rule fails the start, and a reload keeps nothing",
        "runmode: workers",
        "max-pending-packets: 256",
        "outputs:",
        "  - eve-log:",
        "      enabled: yes",
        "      filetype: regular",
        "      filename: eve.json",
        "      types:",
        "        - alert",
        "        - drop:",
        "            alerts: yes",
        "logging:",
        "  default-log-level: notice",
        "  outputs:",
        "    - console: {enabled: no}",
        f"    - file: {{enabled: yes, filename: {_yaml_string(str(workdir / 'suricata.log'))}}}",
        "af-packet:",
        *(
            line
            for cluster, (src, dst) in ((98, (in_if, out_if)), (97, (out_if, in_if)))
            for line in (
                f"  - interface: {src}",
                "    threads: 1",
                f"    cluster-id: {cluster}",
                "    cluster-type: cluster_flow",
                "    defrag: no",
                "    copy-mode: ips",
                f"    copy-iface: {dst}",
                "    checksum-checks: no",
                "    use-mmap: yes",
                "    ring-size: 2048",
            )
        ),
        "unix-command:",
        "  enabled: yes",
        f"  filename: {_yaml_string(str(workdir / 's.sock'))}",
        "stream:",
        "  inline: auto",
        "  midstream: true              # a connection steered mid-stream is picked up",
        "  memcap: 64mb",
        "  reassembly: {memcap: 64mb, depth: 1mb}",
        "flow: {memcap: 32mb, hash-size: 4096, prealloc: 1000}",
        "defrag: {memcap: 8mb}",
        "app-layer:",
        "  protocols:",
        "    http: {enabled: yes}",
        "    tls: {enabled: yes}",
        "    dns: {enabled: yes}",
        "detect:",
        "  profile: low",
        "",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# the program a Suricata guest runs


@dataclass(eq=False)
class SuricataProgram:
    """Suricata between a guest's two data NICs (the guest's ``ForwardingProgram``, see
    :mod:`osc_gitops_sandbox.datapath.guests`): it forwards while Suricata runs.

    ``workdir``: the guest's folder (config, rules, eve.json, log, unix socket; keep it short:
    the socket path must stay under 107 bytes). ``on_change`` is told every failure and
    recovery (the security manager's view of its guests)."""

    suricata: SuricataRoot
    netns: str
    workdir: Path
    _: KW_ONLY
    vnf: str
    node: str
    vm: str
    rules: str
    groups: dict[str, list[str]]
    """Group name -> member addresses (a copy; a reload with new groups replaces it)."""
    on_change: Callable[[SuricataProgram], None] | None = None
    in_if: str = "eth0"
    out_if: str = "eth1"
    name: str = field(default="suricata", init=False)
    daemon: Daemon | None = field(default=None, init=False)
    failure: str | None = field(default=None, init=False)
    """Why Suricata does not run although it should (start or reload failed, it died):
    the guest's report. ``None`` while it runs or was stopped on purpose."""
    reloads: int = field(default=0, init=False)
    """Successful reloads since the start (members pushed)."""
    _watcher: threading.Thread | None = field(default=None, init=False)
    _wanted: bool = field(default=False, init=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, init=False)

    def __post_init__(self) -> None:
        self.groups = {k: list(v) for k, v in self.groups.items()}

    # -- files -----------------------------------------------------------------------------
    @property
    def config(self) -> Path:
        return self.workdir / "suricata.yaml"

    @property
    def eve(self) -> Path:
        return self.workdir / "eve.json"

    @property
    def log(self) -> Path:
        return self.workdir / "suricata.log"

    @property
    def socket(self) -> Path:
        return self.workdir / "s.sock"

    def _write(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "threshold.config").touch()
        (self.workdir / "local.rules").write_text(self.rules)
        text = render_config(self.workdir, self.suricata.config_dir, self.groups,
                             in_if=self.in_if, out_if=self.out_if)  # fmt: skip
        tmp = self.config.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, self.config)

    # -- the ForwardingProgram side --------------------------------------------------------
    def start(self, forward: bool) -> None:
        """Write the configuration; start Suricata now if ``forward`` (else once booted)."""
        self._write()
        if forward:
            self.forward(True)

    def forward(self, enabled: bool) -> None:
        """Run Suricata (the guest forwards once its engine started) or stop it (nothing is
        forwarded: a dead VNF)."""
        with self._lock:
            self._wanted = enabled
            if enabled and not self.running:
                self._launch()
            elif not enabled:
                self._halt()
                self._set_failure(None)

    def close(self) -> None:
        with self._lock:
            self._wanted = False
            self._halt()

    # -- process ---------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.daemon is not None and self.daemon.alive()

    @property
    def pid(self) -> int | None:
        return self.daemon.pid if self.running and self.daemon is not None else None

    def _launch(self) -> None:
        self._write()
        self.socket.unlink(missing_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.log.rename(self.log.with_suffix(".log.1"))  # this start's log alone
        self.daemon = Daemon(
            f"suricata (VNF {self.vnf} on {self.node}, guest {self.netns})",
            [
                "ip", "netns", "exec", self.netns,  # execs: the pid is Suricata's
                *self.suricata.command("suricata"), "-c", str(self.config), "--af-packet",
                "-k", "none", "-l", str(self.workdir),
            ],
            self.log, self.socket, dict(os.environ),
            # started from the virt-handler's thread or the caller's, both outlive it: killed
            # with them should the harness die without cleaning up
            pdeathsig=True,
        )  # fmt: skip
        daemon = self.daemon
        self._set_failure(None)
        self._watcher = threading.Thread(
            target=self._watch, args=(daemon,), name=f"suricata-{self.netns}", daemon=True
        )
        self._watcher.start()

    def _watch(self, daemon: Daemon) -> None:
        """Report it when Suricata exits while it should run (a bad rule file at start, a
        crash, a kill)."""
        daemon.proc.wait()
        with self._lock:
            if self.daemon is daemon and self._wanted:
                self._set_failure(
                    f"Suricata exited with code {daemon.proc.returncode}: "
                    f"{self._errors() or tail(self.log, 3)}"
                )

    def _halt(self) -> None:
        daemon, self.daemon = self.daemon, None
        if daemon is not None:
            daemon.stop(timeout=5.0, sig=signal.SIGTERM)

    def _errors(self) -> str:
        """The ``Error:`` lines of Suricata's log (its last start), joined."""
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return " | ".join(ln.split("Error: ", 1)[1] for ln in lines if "Error: " in ln)[-600:]

    def _set_failure(self, failure: str | None) -> None:
        changed = failure != self.failure
        self.failure = failure
        if changed and self.on_change is not None:
            self.on_change(self)

    def ready(self) -> bool:
        """Suricata runs and its engine started (it forwards)."""
        if not self.running:
            return False
        try:
            return READY_LINE in self.log.read_text(errors="replace")
        except OSError:
            return False

    def wait_ready(self, timeout: float = 20.0) -> float:
        """Until Suricata forwards; the seconds it took. Raises :class:`SuricataError` when it
        exits or is not ready in time."""
        return seconds_until(
            self.ready, timeout, check=self._check_running,
            late=lambda: SuricataError(
                f"Suricata of VNF {self.vnf} on {self.node} not ready after {timeout} s; "
                f"log {self.log}:\n{tail(self.log)}"
            ),
        )  # fmt: skip

    def _check_running(self) -> None:
        if self.running:
            return
        # the process is gone but its watcher may not have recorded why yet: wait for it, so
        # the error and :attr:`failure` both say it
        if self._watcher is not None:
            self._watcher.join(timeout=5.0)
        raise SuricataError(
            f"Suricata of VNF {self.vnf} on {self.node} does not run: {self.failure or 'stopped'}"
        )

    # -- the unix socket -------------------------------------------------------------------
    def command(self, name: str, timeout: float = 20.0) -> Any:
        """One unix-socket command through ``suricatasc -c NAME`` (``reload-rules``,
        ``ruleset-stats``, ...): its ``message``; raises when Suricata answers ``NOK``."""
        argv = [*self.suricata.command("suricatasc"), "-c", name, str(self.socket)]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                  check=False)  # fmt: skip
            answer = json.loads(proc.stdout) if proc.stdout.strip() else {}
        except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
            raise SuricataError(f"suricatasc -c {name} ({self.socket}): {exc}") from exc
        if proc.returncode != 0 or answer.get("return") != "OK":
            raise SuricataError(
                f"suricatasc -c {name} ({self.socket}) failed (exit {proc.returncode}): "
                f"{answer.get('message') or proc.stderr.strip()}"
            )
        return answer.get("message")

    def _last_reload(self) -> str:
        message = self.command("ruleset-reload-time")
        return str(message[0].get("last_reload")) if message else ""

    def reload(
        self, groups: Mapping[str, Sequence[str]] | None = None, rules: str | None = None
    ) -> float:
        """Apply new address groups and/or rules without a restart: rewrite the files, then
        ``reload-rules``; the seconds it took. A guest not running keeps them for its next
        start; one still starting is waited for. A reload that does not take
        (``init-failure-fatal``: a bad rule keeps the old engine, and ``ruleset-reload-time``
        does not move) stops Suricata: the guest reports the failure and forwards nothing, so
        OVN's health check fails and the failure policy acts. Raises :class:`SuricataError`
        then."""
        with self._lock:
            if groups is not None:
                self.groups = {k: list(v) for k, v in groups.items()}
            if rules is not None:
                self.rules = rules
            self._write()
            if not self.running:
                return 0.0
            started = time.monotonic()
            try:
                # still starting: it may have read the files before this write, so wait and
                # reload (its unix socket answers once the engine runs)
                self.wait_ready()
                before = self._last_reload()
                self.command("reload-rules")
                after = self._last_reload()
                if after == before:
                    raise SuricataError(
                        f"Suricata of VNF {self.vnf} on {self.node} did not reload its rules: "
                        f"{self._errors() or tail(self.log, 3)}"
                    )
            except SuricataError as exc:
                self._halt()
                self._set_failure(f"reload failed, Suricata stopped: {exc}")
                raise
            self.reloads += 1
            return time.monotonic() - started

    # -- evidence --------------------------------------------------------------------------
    def events(self, event_type: str = "alert") -> list[dict[str, Any]]:
        """eve.json's records of ``event_type`` (``alert``, ``drop``), oldest first."""
        try:
            lines = self.eve.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return []
        out = []
        for line in lines:
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if record.get("event_type") == event_type:
                    out.append(record)
        return out

    def status(self) -> dict[str, Any]:
        """What the guest reports (the security manager's ``GET /status``)."""
        return {
            "vnf": self.vnf, "node": self.node, "virtualMachine": self.vm, "eve": str(self.eve),
            "running": self.running, "ready": self.ready(), "failure": self.failure,
            "reloads": self.reloads, "groups": {k: sorted(v) for k, v in self.groups.items()},
        }  # fmt: skip


@dataclass
class SuricataPrograms:
    """Which guests run Suricata, and what every Suricata guest is given: the data path's
    choice of forwarding program (``Datapath(programs=...)``; see
    :mod:`osc_gitops_sandbox.datapath.guests`).

    A VM whose image names Suricata (:func:`is_suricata_image`) gets a
    :class:`SuricataProgram` with the rules of its VnfDeployment (:attr:`rules`, else
    :data:`DEFAULT_RULES`) and the address groups the security manager last pushed for its VNF
    and node (:meth:`set_members`); every other VM the Linux bridge (``None``)."""

    workdir: Path
    suricata: SuricataRoot = field(default_factory=root)
    rules: dict[str, str] = field(default_factory=dict)
    """VnfDeployment name -> the rule file its Suricata guests are given."""
    groups: dict[tuple[str, str], dict[str, list[str]]] = field(default_factory=dict)
    """(VNF, node) -> Suricata address group -> addresses (from the security manager)."""
    on_change: Callable[[SuricataProgram], None] | None = None
    running: dict[str, SuricataProgram] = field(default_factory=dict)
    """Every program handed out, by guest namespace (closed ones included until replaced)."""
    _count: int = 0
    _lock: threading.RLock = field(default_factory=threading.RLock)

    def __call__(
        self, vm: Mapping[str, Any], vmi: Mapping[str, Any], netns: str, node: str,
        nics: Sequence[str] = ("eth0", "eth1"),
    ) -> SuricataProgram | None:  # fmt: skip
        image = _image_of(vmi) or _image_of(vm.get("spec", {}).get("template", {}))
        if not image or not is_suricata_image(image):
            return None
        reason = self.suricata.unavailable_reason()
        if reason:
            raise SuricataError(reason)
        meta = vm["metadata"]
        vnf = (meta.get("labels") or {}).get("osc.io/vnf") or meta["name"]
        with self._lock:
            self._count += 1
            program = SuricataProgram(
                self.suricata, netns, self.workdir / f"s{self._count}", vnf=vnf, node=node,
                vm=f"{meta['namespace']}/{meta['name']}",
                rules=self.rules.get(vnf, DEFAULT_RULES),
                groups=self.groups.get((vnf, node), {}), on_change=self.on_change,
                in_if=nics[0], out_if=nics[1],
            )  # fmt: skip
            self.running = {k: p for k, p in self.running.items() if p.running or p.failure} | {
                netns: program
            }
        return program

    def of(self, vnf: str, node: str) -> list[SuricataProgram]:
        """The Suricata guests of VNF ``vnf`` on ``node`` that were not closed."""
        with self._lock:
            return [p for p in self.running.values()
                    if p.vnf == vnf and p.node == node and (p.running or p.failure)]  # fmt: skip

    def set_members(self, vnf: str, node: str, groups: Mapping[str, Sequence[str]]) -> float:
        """New address groups for VNF ``vnf`` on ``node``: kept for guests started later and
        reloaded into the running ones; the longest reload's seconds. Raises
        :class:`SuricataError` when a guest's reload failed (that guest stopped)."""
        with self._lock:
            self.groups[(vnf, node)] = {k: list(v) for k, v in groups.items()}
            programs = self.of(vnf, node)
        took, errors = 0.0, []
        for program in programs:
            try:
                took = max(took, program.reload(groups=groups))
            except SuricataError as exc:
                errors.append(str(exc))
        if errors:
            raise SuricataError("; ".join(errors))
        return took

    def set_rules(self, vnf: str, rules: str) -> None:
        """A new rule file for VnfDeployment ``vnf``: kept for guests started later and
        reloaded into the running ones (a bad one stops them, see
        :meth:`SuricataProgram.reload`)."""
        with self._lock:
            self.rules[vnf] = rules
            programs = [p for p in self.running.values() if p.vnf == vnf and p.running]
        errors = []
        for program in programs:
            try:
                program.reload(rules=rules)
            except SuricataError as exc:
                errors.append(str(exc))
        if errors:
            raise SuricataError("; ".join(errors))


def _image_of(spec: Mapping[str, Any]) -> str:
    """The containerDisk image of a VMI spec or VM template."""
    inner = spec.get("spec", spec)
    for volume in (inner or {}).get("volumes") or []:
        image = (volume.get("containerDisk") or {}).get("image")
        if image:
            return str(image)
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m osc_gitops_sandbox.datapath.suricata",
        description="Show or verify the Suricata root the sandbox's inspecting VNF guests run.",
    )
    sub = parser.add_subparsers(dest="command")
    verify = sub.add_parser("verify", help="check a root: Suricata 8.0.x and suricatasc run")
    verify.add_argument("--root", help="the root to check (default: the cache folder)")
    sub.add_parser("show", help="print the version (default)")
    args = parser.parse_args(argv)
    where = SuricataRoot(Path(args.root)) if getattr(args, "root", None) else root()
    try:
        if args.command == "verify":
            print(where.verify())
            return 0
        reason = where.unavailable_reason()
        print(f"{where.root}: {reason or where.verify()}")
        return 0 if reason is None else 1
    except SuricataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
