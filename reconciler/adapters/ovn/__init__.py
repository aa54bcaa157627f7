"""The OVN Northbound adapter: the IDL-backed writer (``northbound``) and the one-shot snapshot
reader (``snapshot``). The only modules that import ``ovs``/``ovsdbapp``."""
