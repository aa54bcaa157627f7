"""The OVN Northbound adapter: the only package that imports ``ovs``/``ovsdbapp``.

Callers need only what is re-exported here::

    from reconciler.adapters.ovn import OvnNorthbound, OvnSettings, OvnSnapshot, OvnError

Three adapters, one per kind of command: :class:`OvnNorthbound` (the loop: an IDL mirror
followed incrementally), :class:`OvnOneShot` (``apply``: snapshot reads, one raw transaction)
and :class:`OvnSnapshot` (``plan``: reads only). All write through the same transaction
builder and commit logic.

The modules, one concern each:

``tables``       the one registry of NB tables/columns we read and write (start here to add one)
``rows``         how the rows we only read (pods, switches) become observed values
``errors``       the OvnError family (``reconciler.errors.EndpointError``)
``settings``     OvnSettings: how to reach the NB, which rows are ours, the timeout
``northbound``   OvnNorthbound: connect, write lock, read, apply (the IDL-backed adapter)
``read_cache``   the incremental read of the IDL cache
``oneshot``      OvnOneShot: snapshot reads + one raw transaction under the write lock
``snapshot``     OvnSnapshot / read_snapshot: the one-shot read (and the index a write needs)
``transaction``  symbolic changes -> the raw operations of one transaction; did it commit?
``commit``       waiting for a reply while the server is alive; finding out after a lost one
``wire``         values in the OVSDB JSON wire format, checked against the column type
``datum``        values out of the IDL's Datum (reading the cache)
``idl_patches``  our ovs/ovsdbapp subclasses and why each exists
``rpc``          the raw JSON-RPC session (framing, TLS, Raft leader, locks)
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
from reconciler.adapters.ovn.northbound import OvnNorthbound, write_lock_name
from reconciler.adapters.ovn.oneshot import OvnOneShot
from reconciler.adapters.ovn.settings import OvnSettings
from reconciler.adapters.ovn.snapshot import OvnSnapshot, read_snapshot, snapshot_operations
from reconciler.adapters.ovn.tables import symbolic_columns
from reconciler.adapters.ovn.transaction import OvnChange
from reconciler.core.observed import OvnState

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
