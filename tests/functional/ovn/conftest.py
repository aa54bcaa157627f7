"""The OVN adapter against real ovsdb-server processes (fixtures: ``tests.fixtures.ovn``)."""

from tests.fixtures.ovn import nb23, nb26, pods  # noqa: F401
