"""Unpacking an untrusted zip (DICOM folders, uploaded images) into a private folder.

Refused, with nothing kept: entries whose paths escape the folder (absolute, `..`),
symlinks, more than MAX_ZIP_ENTRIES entries, and more than MAX_UNZIPPED_BYTES once
unpacked (a zip bomb), counted on the bytes actually written, not the sizes the zip
declares.
"""

from __future__ import annotations

import io
import stat
import zipfile
from pathlib import Path, PurePosixPath

from pxp.data.importers.common import ImportProblems
from pxp.data.importers.limits import MAX_UNZIPPED_BYTES, MAX_ZIP_ENTRIES

_CHUNK = 1024 * 1024


def _gb(n: int) -> str:
    return f"{n / 1024**3:g} GB" if n >= 1024**3 else f"{n / 1024**2:g} MB"


def extract_zip(source: Path | bytes, root: Path, *, name: str = "",
                max_bytes: int = MAX_UNZIPPED_BYTES) -> int:
    """Unpack `source` (a path or the zip's bytes) under `root`; the number of files.

    ImportProblems (one line, `name: reason`) for an unsafe or oversized zip; files
    already written are removed again.
    """
    label = name or (source.name if isinstance(source, Path) else "zip")
    try:
        zf = zipfile.ZipFile(io.BytesIO(source) if isinstance(source, bytes) else source)
    except (zipfile.BadZipFile, OSError):
        raise ImportProblems([f"{label}: not a valid zip file"]) from None
    written: list[Path] = []
    try:
        with zf:
            infos = zf.infolist()
            if len(infos) > MAX_ZIP_ENTRIES:
                raise ImportProblems([f"{label}: {len(infos)} entries, more than the "
                                      f"{MAX_ZIP_ENTRIES:,} limit"])
            total = 0
            for info in infos:
                entry = PurePosixPath(info.filename.replace("\\", "/"))
                if entry.is_absolute() or ".." in entry.parts or ":" in entry.parts[0]:
                    raise ImportProblems([f"{label}: entry {info.filename!r} escapes the zip"])
                if stat.S_ISLNK(info.external_attr >> 16):
                    raise ImportProblems([f"{label}: entry {info.filename!r} is a symlink"])
                if info.is_dir():
                    continue
                dest = root.joinpath(*entry.parts)
                dest.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, dest.open("wb") as out:
                    written.append(dest)
                    while chunk := src.read(_CHUNK):
                        total += len(chunk)
                        if total > max_bytes:
                            raise ImportProblems([f"{label}: more than {_gb(max_bytes)} once "
                                                  "unpacked (possible zip bomb)"])
                        out.write(chunk)
    except ImportProblems:
        for p in written:
            p.unlink(missing_ok=True)
        raise
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as err:
        for p in written:
            p.unlink(missing_ok=True)
        raise ImportProblems([f"{label}: cannot unpack ({' '.join(str(err).split())})"]) from None
    return len(written)



