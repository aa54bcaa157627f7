"""Desired + observed → target (``compile``), and target vs what we own live → plan (``diff``).

Above the steering backends (compile asks the chosen backend for its rows), below the
transitions (a rollout diffs a VM's template) and the planners that run both."""
