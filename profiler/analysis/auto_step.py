"""The automatic step's loop in a script's record (``script.auto_step``, written by
``profiler.capture.script.detect.LoopMarks.record``): which of the watched loops was chosen, and
where it is, said the same way everywhere. A loop is named by its line and, where it is not the
script's, its file (a module of the script's folder: ``cs231n/solver.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def chosen_loop(auto: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The chosen loop's entry among ``auto['loops']`` (its line and file), or None."""
    line = auto.get("chosen_line")
    if not line:
        return None
    file = auto.get("chosen_file") or ""
    return next(
        (
            lp
            for lp in auto.get("loops") or ()
            if lp.get("line") == line and (lp.get("file") or "") == file
        ),
        None,
    )


def chosen_where(auto: Mapping[str, Any]) -> str:
    """``line 41``, or ``line 130 of cs231n/solver.py``; "" with no loop chosen."""
    line = auto.get("chosen_line")
    if not line:
        return ""
    file = auto.get("chosen_file") or ""
    return f"line {line} of {file}" if file else f"line {line}"
