"""What the engine tells the outside world: logs (``logs``), Prometheus metrics and probes
(``metrics``), and the status file behind ``osc-gitops status`` (``status``)."""
