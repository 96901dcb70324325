"""The script's own modules, imported with their loops marked as the script's are.

Place in the pipeline: installed by the script process (``profiler.capture.script.worker``)
before the script runs, beside the framework's ``detect.ImportWatcher``. A course's script often
calls a training loop written in a module beside it (CS231n's ``Solver.train`` in
``cs231n/solver.py``, Nielsen's ``Network.SGD`` in ``network.py``): with only the script's loops
marked, no loop was seen and the whole run was one step. A module is the script's own when its
top-level name is a ``.py`` file or a folder in the script's folder, its file lies under that
folder, and it is not an installed package's (no ``site-packages``, nothing under the
interpreter's prefix) nor this toolkit's.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from profiler.capture.script import source

#: Top-level names never marked: this toolkit's own package.
_SKIP = frozenset({"profiler"})


class OwnModules(importlib.abc.MetaPathFinder):
    """Finds the script's own modules and loads them marked (``MarkedLoader``)."""

    def __init__(self, loops: Any, script: Path) -> None:
        self.loops = loops
        self.folder = os.path.realpath(script.parent)
        # Not the script itself (a child process of multiprocessing's may import it by name).
        self.names = _top_names(self.folder) - {script.stem}
        paths = sysconfig.get_paths()
        self.outside = tuple(
            os.path.realpath(p) + os.sep
            for p in {sys.prefix, sys.base_prefix, paths.get("purelib"), paths.get("platlib")}
            if p
        )
        #: Modules marked (name -> file relative to the folder), and those that failed.
        self.marked: dict[str, str] = {}
        self.notes: list[str] = []

    def install(self) -> None:
        if self.names:
            sys.meta_path.insert(0, self)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.partition(".")[0] not in self.names:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return None
        origin = os.path.realpath(str(spec.origin or ""))
        if not origin.endswith(".py") or not origin.startswith(self.folder + os.sep):
            return None
        if any(origin.startswith(p) for p in self.outside) or "site-packages" in origin:
            return None
        spec.loader = MarkedLoader(fullname, str(spec.origin), self)
        return spec


class MarkedLoader(importlib.machinery.SourceFileLoader):
    """A module's source with every loop marked (``source.mark_loops``, numbered after the
    loops already watched), compiled afresh at each import (no bytecode is read or written:
    the marks are this run's), its globals given the marks' names."""

    def __init__(self, fullname: str, path: str, owner: OwnModules) -> None:
        super().__init__(fullname, path)
        self.owner = owner

    def get_code(self, fullname: str) -> Any:
        owner = self.owner
        path = Path(self.path)
        try:
            src = source.load(path)
        except source.ScriptError as exc:
            owner.notes.append(f"{fullname}: not marked ({exc})")
            return super().get_code(fullname)
        rel = os.path.relpath(os.path.realpath(path), owner.folder)
        loops = owner.loops
        sites = source.mark_loops(src, first=len(loops.sites), file=rel)
        if not sites:
            return super().get_code(fullname)
        try:
            code = src.compile()
        except (SyntaxError, ValueError) as exc:
            owner.notes.append(f"{fullname}: not marked ({exc})")
            return super().get_code(fullname)
        loops.add(sites)
        owner.marked[fullname] = rel
        return code

    def exec_module(self, module: ModuleType) -> None:
        loops = self.owner.loops
        g = vars(module)
        g[source.LOOP_MARK], g[source.LOOP_END] = loops.mark, loops.end
        g[source.LOOP_ON] = loops.on
        super().exec_module(module)


def _top_names(folder: str) -> frozenset[str]:
    """The importable top-level names the folder holds: its ``.py`` files and its folders."""
    try:
        entries = os.listdir(folder)
    except OSError:
        return frozenset()
    names = set()
    for e in entries:
        if e.startswith(".") or e == "__pycache__":
            continue
        full = os.path.join(folder, e)
        if e.endswith(".py") and os.path.isfile(full):
            names.add(e[:-3])
        elif os.path.isdir(full) and e.isidentifier():
            names.add(e)
    return frozenset(n for n in names if n.isidentifier() and n not in _SKIP)
