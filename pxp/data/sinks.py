"""Rows written to a JSONL, CSV or Parquet file a chunk at a time (`pxp export`, docs/research.md,
Exports), so that a file of any length is written in bounded memory.

Each column has one type for the whole file (`KINDS`; text when not listed): whole numbers stay whole
where a value is missing (CSV), and every Parquet row group has the same schema. Dicts and lists are
JSON text in CSV and Parquet, JSON in JSONL.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

#: the kind of each column that is not text ("int", "float", "bool"), by column name
KINDS = {
    **dict.fromkeys(("repetition", "session", "ordinal", "j", "messages", "after_session", "instances", "attempt",
                     "tokens_in", "tokens_out", "cache_read", "cache_write"), "int"),
    **dict.fromkeys(("learn_val_before", "learn_val_after", "prediction_accuracy", "explanation_accuracy",
                     "both_accuracy", "latency_ms", "cost_usd"), "float"),
    **dict.fromkeys(("context_kept", "match", "agree", "changed", "truth", "answer", "valid"), "bool"),
}


class Sink:
    """One file of rows (`fmt`: jsonl, csv or parquet) with these columns; `write` a chunk, then `close`."""

    def __init__(self, path: Path, fmt: str, columns: list[str]) -> None:
        self.path, self.fmt, self.columns, self.rows = path, fmt, columns, 0
        self._file: IO[str] | None = None
        self._parquet: Any = None
        self._header = False
        if fmt in ("jsonl", "csv"):
            self._file = path.open("w", encoding="utf-8", newline="")

    def write(self, rows: list[dict[str, Any]]) -> None:
        if not rows and (self._header or self.fmt == "jsonl"):
            return
        if self.fmt == "jsonl":
            assert self._file is not None
            self._file.writelines(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows)
        else:
            flat = [{k: (json.dumps(v, ensure_ascii=False) if isinstance(v, dict | list) else v) for k, v in r.items()}
                    for r in rows]
            self._csv(flat) if self.fmt == "csv" else self._pq(flat)
            self._header = True
        self.rows += len(rows)

    def _csv(self, flat: list[dict[str, Any]]) -> None:
        import pandas as pd

        df = pd.DataFrame(flat, columns=self.columns)
        for c in self.columns:
            if KINDS.get(c) == "int":  # whole numbers even where a value is missing
                df[c] = df[c].astype("Int64")
        df.to_csv(self._file, index=False, header=not self._header)

    def _pq(self, flat: list[dict[str, Any]]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        types = {"int": pa.int64(), "float": pa.float64(), "bool": pa.bool_()}
        schema = pa.schema([(c, types.get(KINDS.get(c, ""), pa.string())) for c in self.columns])
        if self._parquet is None:
            self._parquet = pq.ParquetWriter(self.path, schema)
        self._parquet.write_table(pa.Table.from_pylist(flat, schema=schema))

    def close(self) -> None:
        """Write the header (an empty file's columns) if nothing was written, and close the file."""
        if not self._header:
            self.write([])
        if self._file is not None:
            self._file.close()
        if self._parquet is not None:
            self._parquet.close()
