"""The imperative shell around the core: the one observe-plan-apply-verify pipeline, the loop
that schedules it, and what it reports (logs, metrics, status). It reaches the live world only
through the provider protocols, so every adapter can be replaced by an in-memory fake."""
