"""Measurements shared by every layer above the records: critic metrics (``verifyless.metrics.critic``)."""
