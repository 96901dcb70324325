"""The workload spec of a user's script: built in the parent, run by the script process.

Place in the pipeline: ``cli`` builds a ``ScriptSpec`` with ``from_args`` (checking the script and
its step options: bad input exits 2 before anything is written); ``runner`` sees the spec's
``WORKER_MODULE`` and ``worker_options`` and starts ``python -m profiler.capture.script`` for it;
the summary names the workload after the script's file. The spec's ``build`` is never called: the
script drives itself.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from profiler.capture.loop import Loop, Params, WorkloadSpec
from profiler.capture.script import source
from profiler.model.text import shown
from profiler.redact import redact_argv


def _not_built(_params: Params) -> Loop:
    raise RuntimeError("a script is run by `python -m profiler.capture.script`, never built")


@dataclass(frozen=True)
class ScriptSpec(WorkloadSpec):
    """A user's script as a workload (``framework`` ``script``).

    Attributes:
        path: the script, absolute.
        argv0: the script's path as the user gave it (the script's ``sys.argv[0]``).
        argv: the script's own arguments.
        step_function: ``--step-function`` (a function of the script), if given.
        step_line: ``--step-line``'s line number, if given.
        max_steps: ``--max-steps``: stop the script after this many steps.
        graph_mode: ``--graph-mode``: disable eager execution before the script starts.
        stdin: ``--stdin``: a file given to the script as its standard input.
        steps: ``--steps``: the timed window's steps (None: about a second of steps).
        auto_step: without framework steps or marks, the script's loop whose iterations look
            like training steps is chosen (``--no-auto-step``: off).
    """

    path: str = ""
    argv0: str = ""
    argv: tuple[str, ...] = ()
    step_function: str | None = None
    step_line: int | None = None
    max_steps: int | None = None
    graph_mode: bool = False
    stdin: str | None = None
    steps: int | None = None
    auto_step: bool = True

    #: The module the runner starts for this workload (``python -m``).
    WORKER_MODULE: ClassVar[str] = "profiler.capture.script"
    #: The variable the script's process reads the script's arguments from (its spec file
    #: holds them redacted: ``profiler.redact``); dropped before the script runs.
    ARGV_ENV: ClassVar[str] = "PROFILER_SCRIPT_ARGV"

    def worker_options(self) -> dict[str, Any]:
        """What the script process needs (``WorkerSpec.options["script"]``)."""
        return {
            "path": self.path,
            "argv0": self.argv0,
            "argv": list(self.argv),
            "step_function": self.step_function,
            "step_line": self.step_line,
            "max_steps": self.max_steps,
            "graph_mode": self.graph_mode,
            "stdin": self.stdin,
            "steps": self.steps,
            "auto_step": self.auto_step,
        }

    @classmethod
    def for_worker(cls, name: str) -> ScriptSpec:
        """The spec the phases see inside the script process (its framework is replaced by
        what the script turns out to use)."""
        return cls(
            name=name,
            title=name,
            doc="",
            seed="",
            framework="script",
            defaults=Params(steps=1, n=1),
            build=_not_built,
        )

    @classmethod
    def from_args(
        cls,
        script: str,
        argv: list[str],
        *,
        step_function: str | None = None,
        step_line: str | None = None,
        max_steps: int | None = None,
        graph_mode: bool = False,
        stdin: Path | None = None,
        steps: int | None = None,
        auto_step: bool = True,
    ) -> ScriptSpec:
        """Check the script and its options and build its spec.

        Raises:
            source.ScriptError: a missing script, one that is not Python, a bad step option,
                an unreadable ``--stdin`` file, graph mode without TensorFlow.
        """
        path = Path(script)
        src = source.load(path)
        line = None
        if step_function:
            source.mark_step_function(src, step_function)
        if step_line:
            line = source.parse_step_line(step_line, path)
            source.mark_step_line(src, line)
        if stdin is not None and (not stdin.is_file() or not os.access(stdin, os.R_OK)):
            what = "a folder, not a file" if stdin.is_dir() else "no such readable file"
            raise source.ScriptError(f"--stdin {stdin}: {what}")
        if graph_mode and importlib.util.find_spec("tensorflow") is None:
            raise source.ScriptError(
                "--graph-mode needs TensorFlow, which is not installed in this environment"
            )
        args = " ".join(redact_argv(argv))
        return cls(
            # Shown text (profiler.model.text): a name with bytes that are not UTF-8 is
            # written with them escaped; path, argv0 and argv stay as given, to run the script.
            name=shown(path.name),
            title=shown(f"your script {script}{' ' + args if args else ''}"),
            doc="",
            seed="",
            framework="script",
            defaults=Params(steps=steps or 1, n=1),
            build=_not_built,
            path=str(path.resolve()),
            argv0=script,
            argv=tuple(argv),
            step_function=step_function,
            step_line=line,
            max_steps=max_steps,
            graph_mode=graph_mode,
            stdin=str(stdin.resolve()) if stdin is not None else None,
            steps=steps,
            auto_step=auto_step,
        )
