"""pxp: the PXP intelligibility protocol between a human expert and an LLM."""

__version__ = "0.1.0"
