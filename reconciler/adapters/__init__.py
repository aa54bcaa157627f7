"""Adapters to the live world. Only modules in this package import ``kubernetes``, ``ovsdbapp``
or ``git``; everything they return is plain data from ``reconciler.core.model.observed``."""
