"""The core's vocabulary: the manifests as typed values (``desired``), the live world
(``observed``), what should exist (``target``), what differs (``plan``), and the names, owner
keys and label selectors every other layer builds with.

The bottom layer of the core: it imports nothing else of ``reconciler.core``."""
