"""Atomic files: a reader sees the old file or the new one, never a part of one.

Place in the pipeline: every file the toolkit writes (traces, summaries, reports, artefacts)
goes through ``atomic_write_bytes``/``atomic_write_text``: a temporary file in the same folder,
fsync, ``os.replace``, then an fsync of the folder so the rename itself survives a crash.
Standard library only (the trace model uses it to save itself).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# mkstemp creates files 0600; written files get the usual 0666 & ~umask instead.
_UMASK = os.umask(0)
os.umask(_UMASK)
_FILE_MODE = 0o666 & ~_UMASK


def fsync_dir(folder: Path) -> None:
    """fsync a folder, so a rename or a new file in it is on disk (best effort)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so readers see the old file or the new one, never a part."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))
