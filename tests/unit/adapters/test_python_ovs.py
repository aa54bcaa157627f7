"""python-ovs' private names that ``reconciler.adapters.ovn.python_ovs`` relies on still exist
and still behave as it assumes, so a python-ovs release that changes them fails here, in CI,
and not in a customer's reconcile. (pyproject.toml pins the range the code was written for.)
"""

from __future__ import annotations

import uuid
from typing import Any

import ovs.version
from ovs import jsonrpc
from ovs.db import idl as ovs_idl

from reconciler.adapters.ovn.python_ovs import PRIVATE_NAMES, RawRequest, release_lock
from tests.support.ovn import PORT_GROUP_SCHEMA


def _idl() -> Any:
    """An IDL that never connects (``run()`` is never called)."""
    helper = ovs_idl.SchemaHelper(None, PORT_GROUP_SCHEMA)
    helper.register_all()
    return ovs_idl.Idl("unix:/nonexistent/nb.sock", helper)


def test_the_private_names_we_rely_on_exist() -> None:
    idl = _idl()
    table = idl.tables["Port_Group"]
    row = ovs_idl.Row(idl, table, uuid.uuid4(), ovs_idl.ColumnDefaultDict(table))
    stream = type("Stream", (), {"name": "unix:/nonexistent/nb.sock"})()
    instances = {
        "ovs.jsonrpc.Session": idl._session,
        "ovs.jsonrpc.Connection": jsonrpc.Connection(stream),
        "ovs.db.idl.Idl": idl,
        "ovs.db.idl.Transaction": ovs_idl.Transaction(idl),
        "ovs.db.idl.Row": row,
        "ovs.db.idl.ColumnDefaultDict": row._data,
    }
    missing = [
        f"{owner}.{name}"
        for owner, name in PRIVATE_NAMES
        if not hasattr(instances[owner], name)  # KeyError: give the new class an instance here
    ]
    assert not missing, f"python-ovs {ovs.version.VERSION} lacks {missing}"


def test_the_idl_still_drives_a_raw_request_like_its_own_transactions() -> None:
    """The IDL hands a reply to the outstanding request's ``_process_reply``, aborts it after
    a reconnect through ``_status``, and lets ``release_lock`` forget one it still holds."""
    idl = _idl()
    answered = RawRequest(idl, "transact", ["OVN_Northbound"])
    idl._outstanding_txns[answered.message.id] = answered
    reply = jsonrpc.Message.create_reply(["ok"], answered.message.id)
    assert idl._Idl__txn_process_reply(reply)
    assert answered.poll(0) == {"result": ["ok"], "error": None}

    aborted = RawRequest(idl, "transact", ["OVN_Northbound"])
    idl._outstanding_txns[aborted.message.id] = aborted
    idl._Idl__txn_abort_all()
    assert aborted.lost() and aborted.poll(0) is None

    idl.set_lock("osc_gitops_test")
    kept = RawRequest(idl, "transact", ["OVN_Northbound"])
    idl._outstanding_txns[kept.message.id] = kept
    release_lock(idl, kept)  # Idl.set_lock asserts no transaction is outstanding
    assert idl.lock_name is None and not idl._outstanding_txns
