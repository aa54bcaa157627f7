"""Run ``ovn-trace`` against a Southbound DB (``osc-gitops explain --trace``).

``ovn-trace`` simulates a packet through the logical flows northd compiled into the SB: the
truth of what OVN does with a pod's traffic, short of a real datapath. It must come from the OVN
the cluster runs (an older one cannot read newer actions, e.g. Network Function redirection from
26.03): :meth:`OvnTrace.check_version` compares its version with what the NB needs.

The command is a parameter (``--ovn-trace``, ``OSC_OVN_TRACE``; default ``ovn-trace`` on
``PATH``): the sandbox prints a wrapper that runs its own distribution's binary. Each trace is
one short process with an argument vector (no shell); errors name the SB endpoint.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from reconciler.adapters.ovn.errors import OvnError

__all__ = ["OvnTrace", "OvnTraceError", "TraceOutput"]

_OUTPUT = re.compile(r'/\* output to "([^"]+)"')
_STAGE = re.compile(r"^\s*\d+\. (\w+) \(")
_VERSION = re.compile(r"\b(\d+)\.(\d+)\.\d+")


class OvnTraceError(OvnError):
    """``ovn-trace`` could not run, or refused the trace (the message names the SB)."""


@dataclass(frozen=True, slots=True)
class TraceOutput:
    """One trace: the ports the packet was output to (in order; none: dropped), the last
    pipeline stage it went through, and the whole text for people."""

    outputs: tuple[str, ...]
    last_stage: str
    text: str


class OvnTrace:
    """``ovn-trace`` for one SB remote (``tcp:``, ``ssl:`` with the three files, ``unix:``)."""

    def __init__(
        self,
        sb_remote: str,
        command: str | Sequence[str] = "ovn-trace",
        *,
        private_key: str | None = None,
        certificate: str | None = None,
        ca_cert: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.sb_remote = sb_remote
        self.command = shlex.split(command) if isinstance(command, str) else list(command)
        self.tls = [
            f"--{flag}={value}"
            for flag, value in (
                ("private-key", private_key),
                ("certificate", certificate),
                ("ca-cert", ca_cert),
            )
            if value
        ]
        self.timeout = timeout

    def _run(self, args: Sequence[str]) -> str:
        argv = [*self.command, *args]
        try:
            proc = subprocess.run(
                argv, capture_output=True, text=True, timeout=self.timeout, check=False
            )
        except FileNotFoundError:
            raise OvnTraceError(
                f"cannot trace against OVN SB {self.sb_remote}: {self.command[0]} not found "
                "(install OVN's ovn-trace, or pass --ovn-trace / set OSC_OVN_TRACE; the "
                "sandbox prints its own)"
            ) from None
        except subprocess.TimeoutExpired:
            raise OvnTraceError(
                f"ovn-trace against OVN SB {self.sb_remote} did not answer within "
                f"{self.timeout:.0f} s"
            ) from None
        if proc.returncode != 0:
            reason = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
            raise OvnTraceError(
                f"ovn-trace against OVN SB {self.sb_remote} failed: "
                f"{reason[-1] if reason else f'exit code {proc.returncode}'}"
            )
        return proc.stdout

    def version(self) -> tuple[int, int]:
        """``(major, minor)`` of the ``ovn-trace`` binary (``ovn-trace --version``)."""
        match = _VERSION.search(self._run(["--version"]))
        if match is None:
            raise OvnTraceError(f"cannot tell the version of {' '.join(self.command)}")
        return int(match.group(1)), int(match.group(2))

    def check_version(self, network_function: bool) -> None:
        """Refuse an ``ovn-trace`` too old for the NB: Network Function redirection needs the
        logical-flow actions of OVN 26.03."""
        found = self.version()
        if network_function and found < (26, 3):
            raise OvnTraceError(
                f"{' '.join(self.command)} is OVN {found[0]}.{found[1]:02d}, older than the NB "
                "(Network Function tables need OVN 26.03): pass --ovn-trace of OVN 26.03 or "
                "later (the sandbox prints OSC_OVN_TRACE)"
            )

    def trace(self, datapath: str, microflow: str) -> TraceOutput:
        """Trace one packet entering ``datapath`` as a new connection (``--ct=new``: the
        first packet of a flow, the one steering decides on)."""
        text = self._run([f"--db={self.sb_remote}", *self.tls, "--ct=new", datapath, microflow])
        stages = [m.group(1) for m in map(_STAGE.match, text.splitlines()) if m]
        return TraceOutput(tuple(_OUTPUT.findall(text)), stages[-1] if stages else "", text)
