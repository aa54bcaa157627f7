"""Network Function insertion (OVN >= 26.03), the default steering backend, in four parts:

- ``backend``: :class:`~reconciler.core.steering.network_function.backend.NetworkFunction`,
  the rows of every binding (functions, groups, ACLs, health checks, chains' wiring);
- ``health``: the health index, what OVN says of each function of ours (read once per plan);
- ``gating``: what the backend holds: steering switched onto a function northd has not
  reported healthy waits;
- ``rollout``: a rolling update's drain, a function taken out of its steering groups;
- ``ids``: the 1-255 id budget per NB.

Nothing outside ``reconciler.core.steering`` imports these modules: the package's
``__init__`` exports what callers need, and a backend is reached through
``SteeringBackend``. This ``__init__`` imports nothing, so that the interface
(``steering.base``) can name the health index without importing the backend.
"""
