"""Which ovn-northd versions lose a Port_Group deleted and re-created in one of their
iterations (``reconciler.adapters.ovn.northd_sync``), read from what northd writes into
``NB_Global.options:northd_internal_version``."""

from __future__ import annotations

import pytest

from reconciler.adapters.ovn.northd_sync import affected, parse


@pytest.mark.parametrize(
    ("version", "lost"),
    [
        ("26.03.1-20.46.0-81.8", True),
        ("26.03.0-20.46.0-81.8", True),
        ("26.03.2-20.46.0-81.8", False),
        ("26.03.90-20.47.0-82.0", True),  # main after 26.03: may predate the fix
        ("25.09.3-20.44.0-79.2", True),
        ("25.09.4-20.44.0-79.2", False),
        ("25.03.2-20.41.0-76.1", False),  # before northd handled Port_Groups incrementally
        ("26.09.0-21.0.0-84.0", False),
        ("", False),
        (None, False),
    ],
)
def test_which_northds_lose_a_re_created_port_group(version: str | None, lost: bool) -> None:
    assert affected(version) is lost


def test_the_nb_global_row_is_read_from_a_select_result() -> None:
    options = [["mac_prefix", "0a:58"], ["northd_internal_version", "26.03.1-x"]]
    row = {"_uuid": ["uuid", "5c1"], "nb_cfg": 12, "sb_cfg": 11, "options": ["map", options]}
    state = parse({"rows": [row]})
    assert state is not None
    assert (state.uuid, state.version, state.nb_cfg, state.sb_cfg) == ("5c1", "26.03.1-x", 12, 11)
    assert state.affected and not state.in_step
    assert parse({"rows": []}) is None  # no NB_Global yet: no northd ever ran
