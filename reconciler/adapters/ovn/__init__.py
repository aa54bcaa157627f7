"""The OVN Northbound adapter: the only package that imports ``ovs``/``ovsdbapp``.

Callers need only what is re-exported here::

    from reconciler.adapters.ovn import OvnNorthbound, OvnSettings, OvnSnapshot, OvnError

The modules, one concern each:

``tables``       the one registry of NB tables/columns we read and write (start here to add one)
``rows``         how the rows we only read (pods, switches) become observed values
``errors``       the OvnError family (``reconciler.errors.EndpointError``)
``settings``     OvnSettings: how to reach the NB, which rows are ours
``northbound``   OvnNorthbound: connect, write lock, read, apply (the IDL-backed adapter)
``read_cache``   the incremental read of the IDL cache
``transaction``  symbolic changes -> the commands of one transaction
``datum``        values in and out of the IDL's Datum
``idl_patches``  our ovs/ovsdbapp subclasses and why each exists
``snapshot``     OvnSnapshot / read_snapshot: the one-shot read for ``plan``
``rpc``          the raw JSON-RPC session the snapshot uses (framing, TLS, Raft leader)
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
