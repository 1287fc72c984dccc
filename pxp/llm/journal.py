"""Where the calls in flight are written, without the LLM layer knowing the tables.

A call site reports each call as it is sent with `sent`; whoever runs the call (pxp.running.pxp.journal)
installs a `CallJournal` for the block with `recording`. Outside such a block nothing is written.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol


class CallJournal(Protocol):
    """Writes one pending record per call sent; returns its id."""

    def sent(self, provider: str, model: str, purpose: str, attempt: int) -> int | None: ...


_CURRENT: contextvars.ContextVar[CallJournal | None] = contextvars.ContextVar("pxp_call_journal", default=None)


@contextmanager
def recording(journal: CallJournal) -> Iterator[None]:
    """Report the calls made inside the block to `journal`."""
    token = _CURRENT.set(journal)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def sent(provider: str, model: str, purpose: str, attempt: int) -> int | None:
    """Report a call about to be sent; the pending record's id (None when nothing records)."""
    journal = _CURRENT.get()
    return None if journal is None else journal.sent(provider, model, purpose, attempt)
