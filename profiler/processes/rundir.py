"""Run folders and atomic files.

Place in the pipeline: the runner creates ``runs/<id>.partial/``, every writer puts files in it
through ``atomic_write_*`` (temporary file in the same folder, fsync, ``os.replace``), and when the
run is complete the folder is renamed to ``runs/<id>/`` and ``runs/latest`` is swapped to it in
one ``os.replace`` of a symlink. A reader never sees a half-written file or a half-made run.

Layout of a run (profiler/docs/outputs.md, "The run folder")::

    runs/<YYYYmmdd-HHMMSS>[-n]/
        summary.json  report.html
        workloads/<slug>/    model.json.gz, stdout.log, stderr.log, artefacts of each phase
        tensorboard/<slug>/  the workload's TensorBoard run
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from pathlib import Path

from profiler.model.atomic import atomic_write_bytes, atomic_write_text, fsync_dir

__all__ = ["atomic_write_bytes", "atomic_write_text", "fsync_dir"]

PARTIAL_SUFFIX = ".partial"
LATEST = "latest"


class RunDirError(OSError):
    """The output folder cannot be created or written."""


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def slug(name: str) -> str:
    """A safe, unique file name for a workload name.

    Names that are already safe are kept; anything else is reduced to safe characters and
    suffixed with a short hash of the original, so two different names never share a folder.
    """
    cleaned = _UNSAFE.sub("_", name).strip("._-")[:60]
    if cleaned == name and name not in (".", "..") and name:
        return name
    # surrogatepass: a name holding lone surrogates (undecodable bytes) still hashes, uniquely.
    digest = hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{cleaned or 'workload'}-{digest}"


def new_run_id(root: Path, now: float | None = None) -> str:
    """``YYYYmmdd-HHMMSS``, with ``-n`` appended if that id (or its partial) already exists."""
    base = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    candidate, n = base, 1
    while (root / candidate).exists() or (root / (candidate + PARTIAL_SUFFIX)).exists():
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def check_out(root: Path) -> None:
    """Before a run: ``root/latest``, if there, must be the link a run writes (a folder or a
    file there would break the run's end); ``RunDirError`` says what to move."""
    latest = Path(root) / LATEST
    if latest.is_symlink() or not latest.exists():
        return
    kind = "a folder" if latest.is_dir() else "a file"
    raise RunDirError(
        f"{latest} is {kind}, not the link to the last run a run writes there: move it away"
    )


def create_partial(root: Path, now: float | None = None) -> tuple[str, Path]:
    """Create ``root/<id>.partial/``; raise ``RunDirError`` with one line if it cannot."""
    root = Path(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
        for _ in range(100):
            run_id = new_run_id(root, now)
            path = root / (run_id + PARTIAL_SUFFIX)
            try:
                path.mkdir()
            except FileExistsError:
                continue
            probe = path / ".write-test"
            probe.write_bytes(b"")
            probe.unlink()
            return run_id, path
    except OSError as exc:
        raise RunDirError(f"cannot write the output folder {root}: {exc.strerror or exc}") from exc
    raise RunDirError(f"cannot find a free run id under {root}")


def finalize(root: Path, run_id: str) -> Path:
    """Rename ``<id>.partial`` to ``<id>`` and point ``latest`` at it, atomically."""
    root = Path(root)
    final = root / run_id
    os.replace(root / (run_id + PARTIAL_SUFFIX), final)
    fsync_dir(root)
    point_latest(root, run_id)
    return final


def point_latest(root: Path, run_id: str) -> None:
    tmp = root / f".{LATEST}.{os.getpid()}.tmp"
    try:
        tmp.unlink()
    except FileNotFoundError:
        pass
    os.symlink(run_id, tmp)
    os.replace(tmp, root / LATEST)
    fsync_dir(root)
