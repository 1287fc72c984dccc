"""Controlled runs of the PXP protocol (DESIGN §5): `repetition` (INTERACT over one run's sessions),
`learn` (LEARN and evaluation scheduling), `probes`, `runner` (R repetitions at once, resume, usage),
`progress`, `estimate` and `estimate_text` (cost before a run), `grid`, `demo` (the shipped demo).
"""
