"""The per-workload files rendered from a run's analysis: a renderer table.

Place in the pipeline: analysis -> **artefacts** (and the summary, and the report). Each
renderer takes a workload's analysis (``profiler.analysis.run.WorkloadAnalysis``) and writes
its files into the run folder; it returns what it wrote per phase (``""`` for the workload as a
whole), relative to the workload's folder. The pipeline runs every renderer after capture;
``profiler report RUN`` runs them again from the saved traces. A renderer's failure is a note
of the run, never the end of it.

=================  ===================================================  =========
renderer           file                                                 phase
=================  ===================================================  =========
chrome_trace       ``workloads/<slug>/trace.json.gz``                   (all)
tensorboard        ``tensorboard/<slug>/events...profiler-scalars``     (all)
flame_graph        ``workloads/<slug>/pyspy.collapsed.txt``,            sampled
                   ``workloads/<slug>/flamegraph.svg``
line_tables        ``workloads/<slug>/lines.txt``                       lines
=================  ===================================================  =========
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from profiler.model import OK
from profiler.model.atomic import atomic_write_text
from profiler.model.records import SampledData

#: What a renderer returns: phase -> files written, relative to the workload's folder.
Written = dict[str, list[str]]
Renderer = Callable[[Path, Any], Written]
#: Errors of the disk itself: they end the run (its folder cannot be written), never a note.
DISK_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM})


def _workload_dir(run_dir: Path, wa: Any) -> Path:
    return run_dir / "workloads" / wa.outcome.slug


def _chrome_trace(run_dir: Path, wa: Any) -> Written:
    from profiler.reports import chrome_trace

    wdir = _workload_dir(run_dir, wa)
    path = chrome_trace.write(wdir / chrome_trace.FILE_NAME, wa.trace)
    return {"": [os.path.relpath(path, wdir)]}


def _tensorboard(run_dir: Path, wa: Any) -> Written:
    from profiler.reports import tensorboard

    path = tensorboard.write(run_dir / "tensorboard" / wa.outcome.slug, wa.trace, wa.attribution)
    return {"": [os.path.relpath(path, _workload_dir(run_dir, wa))]}


def _flame_graph(run_dir: Path, wa: Any) -> Written:
    from profiler.analysis import stacks
    from profiler.reports import flamegraph

    rec = wa.trace.phase("sampled")
    if rec is None or rec.status != OK or not isinstance(rec.data, SampledData):
        return {}
    s = rec.data
    wdir = _workload_dir(run_dir, wa)
    atomic_write_text(wdir / flamegraph.COLLAPSED_FILE, flamegraph.to_collapsed(rec.samples))
    title = (
        f"{wa.outcome.spec.name}: py-spy at {s.rate_hz} Hz"
        f"{', native' if s.native else ''}{', idle included' if s.idle else ''}"
    )
    svg = flamegraph.flame_svg(rec.samples, stacks.classify, title=title)
    atomic_write_text(wdir / flamegraph.FLAME_FILE, svg)
    return {"sampled": [flamegraph.COLLAPSED_FILE, flamegraph.FLAME_FILE]}


def _line_tables(run_dir: Path, wa: Any) -> Written:
    from profiler.model.records import INFLATION_NOTE
    from profiler.reports import lines_text

    rec = wa.trace.phase("lines")
    if rec is None or rec.status != OK or rec.data is None:
        return {}
    notes = [
        f"this window's median step / the warm-up's: {wa.lines_inflation_vs_warmup}x "
        "(summary.json phases[].inflation has it against the timed window)",
        INFLATION_NOTE,
    ]
    text = lines_text.render(wa.line_tables, rec.data.steps_profiled, notes)
    atomic_write_text(_workload_dir(run_dir, wa) / lines_text.TEXT_FILE, text)
    return {"lines": [lines_text.TEXT_FILE]}


RENDERERS: dict[str, Renderer] = {
    "chrome_trace": _chrome_trace,
    "tensorboard": _tensorboard,
    "flame_graph": _flame_graph,
    "line_tables": _line_tables,
}


def write_all(
    run_dir: Path, workloads: Sequence[Any]
) -> tuple[dict[str, Written], dict[str, list[str]]]:
    """Every renderer over every workload that has a trace.

    Returns (per slug, the phase files written: the summary lists them with the phase's own
    artefacts) and (per slug, the renderers' problems).
    """
    written: dict[str, Written] = {}
    problems: dict[str, list[str]] = {}
    for wa in workloads:
        if wa.trace is None:
            continue
        slug = wa.outcome.slug
        (run_dir / "workloads" / slug).mkdir(parents=True, exist_ok=True)
        for name, render in RENDERERS.items():
            try:
                for phase, files in render(run_dir, wa).items():
                    if phase:
                        written.setdefault(slug, {}).setdefault(phase, []).extend(files)
            except OSError as exc:
                if exc.errno in DISK_ERRORS:
                    raise  # a full or unwritable disk ends the run (exit 3), not one renderer
                problems.setdefault(slug, []).append(f"{name}: {type(exc).__name__}: {exc}")
            except Exception as exc:  # one renderer's bug must not lose the run
                problems.setdefault(slug, []).append(f"{name}: {type(exc).__name__}: {exc}")
    return written, problems
