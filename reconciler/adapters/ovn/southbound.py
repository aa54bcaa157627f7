"""Whether the Southbound DB has our ports bound: ``Port_Binding.chassis``, read where a
Southbound is configured (``--ovn-sb``, env ``OSC_OVN_SB``).

A port is really bound once an ovn-controller claimed it: it writes its chassis into the
port's ``Port_Binding`` in the Southbound, and northd later copies the verdict into the NB's
``Logical_Switch_Port.up``, which is all osc-gitops reads without a Southbound. With one, the
unbound-port reports (``reconciler.core.steering.port_binding``) also name a port whose
Port_Binding has no chassis.

One read is one ``transact`` of ``select`` operations, one per port of ours (the table is
indexed on ``logical_port``, so the cost follows our ports, not the cluster's pods), on the
first member of the remote that answers (a Raft follower's answer is good enough for a
report). The Southbound is only ever read: nothing is written there.

:class:`WithSouthbound` wraps an NB adapter (``reconciler.engine.providers.OvnProvider``) so
that each of its reads carries the Southbound's answer in ``OvnState.ports_chassis``. A
Southbound that cannot be read never fails a pass (it feeds reports only): the read is logged
as a warning with the endpoint and the reports fall back to the NB's ``up``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any

from reconciler.adapters.ovn.errors import OvnError
from reconciler.adapters.ovn.rpc import Session, open_member, rpc_error, ssl_context
from reconciler.adapters.ovn.settings import OvnSettings
from reconciler.adapters.ovn.transaction import OvnChange
from reconciler.core.model.observed import OvnState

log = logging.getLogger(__name__)

__all__ = ["SB_DB_NAME", "SouthboundError", "WithSouthbound", "read_port_chassis"]

SB_DB_NAME = "OVN_Southbound"
_LSP = "Logical_Switch_Port"


class SouthboundError(OvnError):
    """The Southbound DB could not be read; the message names its endpoint."""


def read_port_chassis(settings: OvnSettings, ports: Iterable[str]) -> dict[str, bool]:
    """``{logical_port: has a chassis}`` for each of ``ports`` that has a Port_Binding row
    (a port northd has not bound into the Southbound yet is left out). Raises
    :class:`SouthboundError` naming ``settings.remote`` and each member's reason."""
    wanted = sorted(set(ports))
    if not wanted:
        return {}
    members = [m.strip() for m in settings.remote.split(",") if m.strip()]
    if not members:
        raise SouthboundError("cannot read OVN SB: no remote given")
    tls = ssl_context(settings) if any(m.startswith("ssl:") for m in members) else None
    deadline = time.monotonic() + settings.timeout
    reasons: list[str] = []
    for member in members:
        session = open_member(member, tls, deadline, settings.max_reply_bytes)
        if isinstance(session, str):
            reasons.append(session)
            continue
        try:
            return _select(session, wanted)
        except TimeoutError:
            reasons.append(f"{member}: no answer before the timeout ({settings.timeout}s)")
        except OSError as exc:
            reasons.append(f"{member}: {exc.strerror or exc}")
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
            reasons.append(f"{member}: {exc}")
        finally:
            session.close()
    raise SouthboundError(f"cannot read OVN SB at {settings.remote}: {'; '.join(reasons)}")


def _select(session: Session, ports: Sequence[str]) -> dict[str, bool]:
    ops: list[Any] = [
        {
            "op": "select",
            "table": "Port_Binding",
            "where": [["logical_port", "==", port]],
            "columns": ["logical_port", "chassis"],
        }
        for port in ports
    ]
    reply = session.reply(session.send("transact", [SB_DB_NAME, *ops]))
    error = rpc_error(reply)
    if error is not None:
        hint = " (is this an OVN Southbound server?)" if "unknown database" in error else ""
        raise ValueError(error + hint)
    results = reply["result"]
    out: dict[str, bool] = {}
    for port, result in zip(ports, results, strict=True):
        op_error = rpc_error(result)
        if op_error is not None:
            raise ValueError(f"Port_Binding select failed: {op_error}")
        for row in result["rows"]:
            chassis = row.get("chassis")
            # an optional reference: ["uuid", U] when set, ["set", []] when empty
            out[port] = isinstance(chassis, list) and chassis[0] == "uuid"
    return out


def _our_ports(state: OvnState) -> list[str]:
    """Our Logical_Switch_Ports (the names the unbound-port reports ask about)."""
    return sorted({r.key for r in state.owned if r.table == _LSP} | set(state.ports_up))


class WithSouthbound:
    """An NB adapter whose reads also carry ``ports_chassis`` from the Southbound (see the
    module docstring). Everything else is the wrapped adapter's."""

    def __init__(self, inner: Any, settings: OvnSettings) -> None:
        self.inner = inner
        self.sb_settings = settings
        self._last: tuple[OvnState, dict[str, bool], OvnState] | None = None
        self._failing = False

    def read(self) -> OvnState:
        state: OvnState = self.inner.read()
        try:
            chassis = read_port_chassis(self.sb_settings, _our_ports(state))
        except SouthboundError as exc:
            if not self._failing:
                log.warning("cannot read the Southbound; unbound ports judged from the NB only",
                            extra={"error": str(exc)})  # fmt: skip
            self._failing = True
            return state
        if self._failing:
            log.info("the Southbound answers again", extra={"ovn_sb": self.sb_settings.remote})
        self._failing = False
        last = self._last
        if last is not None and last[0] is state and last[1] == chassis:
            return last[2]  # unchanged: the same object, as the NB read cache hands it out
        out = dataclasses.replace(state, ports_chassis=chassis)
        self._last = (state, chassis, out)
        return out

    def apply(self, changes: Sequence[OvnChange], revision: str | None = None) -> None:
        self.inner.apply(changes, revision)

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        # what callers look up on the NB adapter itself (``watch_health``, ``settings``)
        if name == "inner":  # not set yet (a copy): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)
