"""Protocol rules and metrics, pure (no I/O)."""
