"""IPython magics: ``%load_ext profiler``, then ``%%profile_loop`` and ``%profile_run``.

::

    %load_ext profiler

    %%profile_loop --max-steps 300
    for epoch in range(5):
        for x, y in dataset:
            train_step(x, y)

    %profile_run train.py --epochs 1

Place in the pipeline: ``%%profile_loop [run options]`` runs the cell in the kernel's own
namespace as one in-process run (``profiler.live.LiveSession``): the cell's loops are marked and
the one that trains is the steps, exactly as for a script (``--step-function``,
``--step-line`` and ``--max-steps`` work as on the command line), with the phases that run in a
live process. ``%profile_run SCRIPT [args]`` is ``python -m profiler run SCRIPT [args]`` in a
process of its own, its output streamed into the cell. Each shows the run's report inline (the
same self-contained page, in a sandboxed ``iframe``) with the run folder's path, after the text
the terminal prints (for ``%%profile_loop``: ``live.Summary``, the split and the terminal's memory
line, ``profiler.reports.focus_view.memory_line``). A cell that
raises shows what was measured, then its error.
"""

from __future__ import annotations

import hashlib
import html
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

#: The report's height in the notebook (it scrolls inside).
FRAME_HEIGHT_PX = 720


def frame(report: Path, height: int = FRAME_HEIGHT_PX) -> str:
    """The report as an ``iframe`` whose ``srcdoc`` is the page (escaped; sandboxed: its
    scripts run, but it cannot reach the notebook, navigate it or open windows)."""
    page = report.read_text(encoding="utf-8")
    return (
        f'<iframe sandbox="allow-scripts" style="width:100%;height:{int(height)}px;'
        f'border:1px solid #ccc" srcdoc="{html.escape(page, quote=True)}"></iframe>'
    )


def _show(report: Path | None, run_dir: Path | None, lines: list[str]) -> None:
    from IPython.display import display

    for line in lines:
        print(line)
    if run_dir is not None:
        print(f"run folder: {run_dir}")
    if report is not None and report.is_file():
        display({"text/html": frame(report), "text/plain": f"report: {report}"}, raw=True)


def _cell_file(out: Path, cell: str) -> Path:
    """The cell's code as a file under ``OUT/.cells/`` (its frames and lines are named after
    it, and ``profiler report`` can draw its line tables again later)."""
    folder = out / ".cells"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"cell-{hashlib.sha1(cell.encode('utf-8')).hexdigest()[:10]}.py"
    if not path.exists():
        from profiler.model.atomic import atomic_write_text

        atomic_write_text(path, cell)
    return path


def _out_of(tokens: list[str]) -> Path:
    for i, tok in enumerate(tokens):
        if tok == "--out" and i + 1 < len(tokens):
            return Path(tokens[i + 1])
        if tok.startswith("--out="):
            return Path(tok.split("=", 1)[1])
    return Path("runs")


def profile_loop(line: str, cell: str, shell: Any) -> Any:
    """``%%profile_loop [options]``: the cell, profiled in this kernel (module docstring)."""
    from profiler import cli, live
    from profiler.capture.script.driver import StopScript

    tokens = shlex.split(line)
    code_text = shell.transform_cell(cell) if shell is not None else cell
    try:
        path = _cell_file(_out_of(tokens), code_text)
        opts = cli.parse_run(tokens, [str(path)])
    except cli.UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
    except OSError as exc:
        where = _out_of(tokens)
        print(f"error: cannot write under {where}: {exc.strerror or exc}", file=sys.stderr)
        return None
    count = getattr(shell, "execution_count", None)
    name = f"cell-{count}" if count else "cell"
    live.rename(opts, name, f"notebook {name}")
    session = live.LiveSession(opts, "the cell")
    code, module_fn = session.live.compile_file()
    namespace = shell.user_ns if shell is not None else {}
    namespace.update(session.live.marks())
    raised: BaseException | None = None
    session.start(module_fn)
    try:
        exec(code, namespace)
    except BaseException as exc:
        raised = exc
    result = session.stop(raised)
    summary = session.summary()
    lines = [str(summary)] if summary is not None else []
    run_dir = Path(result.run_dir)
    _show(run_dir / "report.html", run_dir, lines)
    if raised is not None and not isinstance(raised, StopScript):
        raise raised
    return None


def profile_run(line: str) -> int:
    """``%profile_run [options] SCRIPT [args]``: the command line's run, shown inline; its
    exit status."""
    tokens = shlex.split(line)
    if not tokens:
        print("usage: %profile_run [options] SCRIPT.py [its arguments]", file=sys.stderr)
        return 2
    command = [sys.executable, "-m", "profiler", "run", "--no-progress", *tokens]
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    report: Path | None = None
    run_dir: Path | None = None
    assert proc.stdout is not None
    try:
        for text in proc.stdout:
            print(text, end="")
            if text.startswith("report: "):
                report = Path(text.removeprefix("report: ").strip())
                run_dir = report.parent
            elif "partial results kept in " in text:
                run_dir = Path(text.split("partial results kept in ", 1)[1].strip())
                report = run_dir / "report.html"
        status = proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(2)
        status = proc.wait()
    _show(report, run_dir, [])
    return status


def load(ipython: Any) -> None:
    """Register the magics (``%load_ext profiler`` calls this)."""

    def _loop(line: str, cell: str) -> Any:
        return profile_loop(line, cell, ipython)

    def _run(line: str) -> None:
        profile_run(line)

    _loop.__doc__ = profile_loop.__doc__
    _run.__doc__ = profile_run.__doc__
    ipython.register_magic_function(_loop, "cell", "profile_loop")
    ipython.register_magic_function(_run, "line", "profile_run")
