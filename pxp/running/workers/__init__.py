"""Who runs what (DESIGN §7): the in-process pool of child processes (`pool`) and, side by side,
the procrastinate queue (`queue`, `queue_schema`, `queue_wait`, `queue_worker`).
"""
