"""What a plan may write *now*: each VNF instance's health as OVN reports it (``health``), the
health gate on switching steering onto an instance (``gating``), rolling template updates
(``rollout``), and the one pass both planners put every plan through (``hold``)."""
