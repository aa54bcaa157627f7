"""The OVN Northbound adapter: the only package that imports ``ovs``/``ovsdbapp`` (and in it,
only ``python_ovs`` imports ``ovs``).

Callers need only what is re-exported here::

    from reconciler.adapters.ovn import OvnNorthbound, OvnSettings, OvnSnapshot, OvnError

Three adapters, one per kind of command: :class:`OvnNorthbound` (the loop: an IDL mirror
followed incrementally), :class:`OvnOneShot` (``apply``: snapshot reads, one raw transaction)
and :class:`OvnSnapshot` (``plan``: reads only). Both writers run the same algorithm
(``writer.write``) on their own channel, with the same transaction builder.

The modules, one concern each:

``tables``       the one registry of NB tables/columns we read and write (start here to add one)
``rows``         how the rows we only read (pods, switches) become observed values
``symbolic``     how a row we own becomes its symbolic OvnRow (both readers)
``errors``       the OvnError family (``reconciler.errors.EndpointError``)
``settings``     OvnSettings: how to reach the NB, which rows are ours, the timeout
``writer``       THE write: lock, send, wait, find out, resend once (the Channel protocol)
``commit``       waiting for a reply while the server is alive; what a lost one means
``transaction``  symbolic changes -> the raw operations of one transaction
``wire``         values in the OVSDB JSON wire format, checked against the column type
``northbound``   OvnNorthbound: connect, read, apply on the IDL's session (IdlChannel)
``read_cache``   the incremental read of the IDL cache
``oneshot``      OvnOneShot: snapshot reads + one raw transaction (RawChannel)
``snapshot``     OvnSnapshot / read_snapshot: the one-shot read (and the index a write needs)
``rpc``          the raw JSON-RPC session (framing, TLS, Raft leader, locks)
``python_ovs``   the only importer of python-ovs (``ovs``): the IDL subclass, the raw request
                 on its session, the change log, values out of its cache, column types
"""

from reconciler.adapters.ovn.errors import (
    OvnApplyError,
    OvnCapabilityError,
    OvnConnectError,
    OvnError,
    OvnLockedError,
    OvnSnapshotError,
    tls_failure,
)
from reconciler.adapters.ovn.northbound import OvnNorthbound
from reconciler.adapters.ovn.oneshot import OvnOneShot
from reconciler.adapters.ovn.settings import OvnSettings
from reconciler.adapters.ovn.snapshot import OvnSnapshot, read_snapshot, snapshot_operations
from reconciler.adapters.ovn.tables import symbolic_columns
from reconciler.adapters.ovn.transaction import OvnChange
from reconciler.adapters.ovn.writer import write_lock_name
from reconciler.core.model.observed import OvnState

__all__ = [
    "OvnApplyError",
    "OvnCapabilityError",
    "OvnChange",
    "OvnConnectError",
    "OvnError",
    "OvnLockedError",
    "OvnNorthbound",
    "OvnOneShot",
    "OvnSettings",
    "OvnSnapshot",
    "OvnSnapshotError",
    "OvnState",
    "read_snapshot",
    "snapshot_operations",
    "symbolic_columns",
    "tls_failure",
    "write_lock_name",
]
