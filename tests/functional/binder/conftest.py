"""The node binder against a real Open_vSwitch database and the API emulator (fixtures:
``tests.fixtures.binder``)."""

from tests.fixtures.binder import node_world  # noqa: F401
