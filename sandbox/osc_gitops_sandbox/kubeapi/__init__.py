"""The Kubernetes API emulator (``server.KubeApiServer``: store, watch, patch, validation,
discovery, OpenAPI, tables, protobuf over one HTTP handler) and the controllers a cluster runs
behind its API (``kubevirt``). Imports no other part of the sandbox."""
