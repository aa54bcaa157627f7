"""Local stand-ins built from real parts: Debian's OVN processes and a wire-compatible
Kubernetes API emulator. Shared by the tests, ``osc-gitops demo`` and the benchmarks."""
