"""Read-only views of a plan and the world for people: why a pod is (not) steered (``explain``,
``tracing``), which pods a plan starts and stops protecting (``protection``), and the typo
guards (``typos``). The top layer of the core: nothing in the core imports it."""
