"""osc-gitops: steer Kubernetes pod traffic through security VNFs over OVN, declared in git.

Package layout (the architecture, in import order):

- pure core, no I/O: ``model`` (manifest contract), ``load``/``validate`` (YAML to model, with
  ``file:line`` errors), ``observed`` (snapshot of the live world), ``target`` (rows that should
  exist), ``compile``/``steering`` (desired + observed -> target), ``diff``/``plan``
  (target vs owned -> plan), ``render`` (plan -> text/json/markdown);
- effects: ``apply``/``loop`` call the adapters only;
- ``adapters``: the only modules that import ``kubernetes``, ``ovsdbapp`` and ``git``;
- ``sandbox``: real local OVN processes and a Kubernetes API emulator for tests, demo and bench;
- ``cli``: a thin argument layer.
"""

__version__ = "0.1.0"
