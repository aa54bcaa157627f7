"""The Kubernetes adapter: the API client (``client``), the informer cache (``cache``) and the
Lease lock (``lease``). The only modules that import ``kubernetes``."""
