"""Steering backends: how a binding becomes OVN rows.

- ``network_function``: OVN Network Function insertion (OVN >= 26.03): Port_Group + ACL with
  ``network_function_group`` -> Network_Function_Group -> Network_Function (the node VNF's ports).
- ``router_policy``: ``Logical_Router_Policy`` ``reroute`` on the cluster router (any OVN), for
  routed (inter-node) traffic only.

Both share the per-node Port_Group of a security group, the match builder and the priority rules
in ``common``.
"""
