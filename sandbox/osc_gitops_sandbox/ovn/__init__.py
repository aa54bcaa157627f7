"""OVN as OVN-Kubernetes runs it: the two distributions' daemons (``distributions``,
``processes``), one stack (``stack.OvnSandbox``) or a Raft NB (``raft``), the rows OVN-Kubernetes
writes (``seed``, ``services``, ``interconnect``), VNF health answers without a data path
(``vnf_health``), and whole clusters against the API emulator: one central NB (``cluster``) or
one zone per node (``zones``)."""
