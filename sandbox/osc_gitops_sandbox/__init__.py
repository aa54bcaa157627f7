"""Local stand-ins built from real parts: Debian's OVN processes and a wire-compatible
Kubernetes API emulator. Shared by the tests, ``osc-gitops demo`` and the benchmarks.

Four parts, each importing only the ones below it (``.importlinter``, ``sandbox-parts``):

- ``demo``: what a person runs (``osc-gitops demo``, ``osc-gitops sandbox up/down``);
- ``datapath``: packets: chassis (OVS + ovn-controller), network namespaces as pods and VNF
  guests, traffic streams, and the packet tests' world;
- ``ovn``: OVN's daemons and databases, and the clusters and zones OVN-Kubernetes would make of
  them against the API emulator;
- ``kubeapi``: the Kubernetes API emulator and the controllers played behind it (KubeVirt).

``lifecycle`` (start/stop/``with`` of everything that owns processes) is shared by all four."""
