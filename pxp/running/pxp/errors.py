"""The engine's refusals (DESIGN §3): what `step` raises, and the user's Ctrl-C.

In their own module so that the engine and its instance loading (pxp.running.pxp.instances) share
them; pxp.running.pxp.engine re-exports them, where callers import them from.
"""

from __future__ import annotations

from pxp.protocols.errors import PxpError


class StepError(PxpError, RuntimeError):
    """Base of the engine's refusals."""


class SessionClosed(StepError):
    """The session has finished or was aborted: it takes no further steps."""


class StepConflict(StepError):
    """Another process took this step first (the unique (session_id, j) key)."""


class TagRefused(StepError):
    """The agent chose a tag the AGENT rule forbids for its facts."""


class Interrupted(PxpError):
    """The user asked the run to stop (Ctrl-C); the session stays open, resumable."""


class StepRefused(StepError):
    """The step's guard refused the write inside its transaction (nothing written)."""
