"""Size limits every importer enforces (bad input is refused, never half-read)."""

MAX_TABLE_BYTES = 2 * 1024 * 1024 * 1024
"""Largest CSV/JSONL file any importer accepts (bytes): read one line at a time, so the bound is
the time an import takes, not memory (a million text rows is about 250 MB)."""
MAX_TEXT_CHARS = 64 * 1024
"""Longest text a user pastes into a form or an import field (a prediction, an explanation,
a label, a report, a CSV cell or a JSONL value): one limit, named in the error."""
MAX_FIELD_CHARS = MAX_TEXT_CHARS
"""Largest single field (CSV cell or JSONL value) any importer accepts: the one text limit."""
MAX_ZIP_ENTRIES = 20_000
"""Most entries accepted in an uploaded or imported zip."""
MAX_UNZIPPED_BYTES = 2 * 1024 * 1024 * 1024
"""Largest total unpacked size of a zip (bytes); more is refused as a zip bomb."""
