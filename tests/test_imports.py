"""The import graph of ``profiler/``: no cycles, and every import points down the layers.

The graph is read from the source with ``ast`` (nothing is imported, TensorFlow least of all):
module-level and function-level ``import`` and ``from`` statements, relative ones resolved. An
import names the most specific module of the package it reaches (``from profiler.model import
atomic`` is an arrow to ``profiler.model.atomic``, ``from profiler.model import OK`` one to
``profiler.model``); a parent package's ``__init__`` that Python runs on the way is not an arrow.

The layers, lowest first, are the package as STYLE.md draws it: entry points -> orchestration
(``processes/``) -> reports -> diagnoses -> analysis -> the case study -> capture (the measured
process) -> the model and the neutral helpers. A module may import its own layer and any layer
below; an arrow up is a failure unless ``EXCEPTIONS`` lists it with its reason.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "profiler"

#: (layer, module prefixes), lowest first. A module belongs to the layer of its longest matching
#: prefix (the prefix itself or a module under it); ``profiler`` alone is the package's
#: ``__init__``. Every module must belong to one (a new top-level module has to be placed).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # Frozen records, int nanoseconds, atomic writes, and leaf helpers that import nothing of
    # ours: the clock, the step markers a script calls (the measured process records them), the
    # process-lifetime guard, redaction of secrets, the report's asset paths, the version.
    (
        "model",
        (
            "profiler.model",
            "profiler.clock",
            "profiler.markers",
            "profiler.lifetime",
            "profiler.redact",
            "profiler.assets",
            "profiler.version",
        ),
    ),
    # What runs inside the measured process: the loop contract, worker, schedule, phases,
    # collectors, the script driver, the what-ifs.
    ("capture", ("profiler.capture",)),
    # The case study: training loops written to the loop contract (capture.loop), and its
    # declared pairs, sweep and efficiency study that the generic layers read by id.
    ("workloads", ("profiler.workloads",)),
    # The case study's own measurement processes: they time its pairs and train seed 004's
    # implementations, so they read the case study (capture's generic runtime never does).
    ("casestudy_processes", ("profiler.capture.experiments", "profiler.capture.efficiency")),
    ("analysis", ("profiler.analysis",)),
    ("diagnoses", ("profiler.diagnoses",)),
    ("reports", ("profiler.reports",)),
    # The parent side: spawning, the pipeline, run folders, jobs across workers.
    ("processes", ("profiler.processes",)),
    # Entry points: the package's public API, the command line, notebooks, Keras, benches.
    (
        "entry",
        (
            "profiler",
            "profiler.__main__",
            "profiler.cli",
            "profiler.ipython",
            "profiler.keras",
            "profiler.live",
            "profiler.bench",
            "profiler.bench_jobs",
            "profiler.bench_noise",
            "profiler.bench_scripts",
        ),
    ),
)

#: Arrows up that stay, (importer, imported): why. Each is a function-local import, so none is
#: run when the importer is imported; each is still a dependency up, to be moved when its
#: function is.
EXCEPTIONS: dict[tuple[str, str], str] = {
    # The analysis of a whole run (``analyse``) and the efficiency section (``summarize``)
    # assemble the analysis with its findings; tests import both from the analysis.
    ("profiler.analysis.run", "profiler.diagnoses.performance"): "analyse() runs the diagnoses",
    ("profiler.analysis.efficiency_pairs", "profiler.diagnoses.efficiency"): (
        "summarize() evaluates the efficiency rules"
    ),
    ("profiler.analysis.efficiency_pairs", "profiler.diagnoses.engine"): (
        "summarize() evaluates the efficiency rules"
    ),
    # compare reads finished runs' summary.json, validated as `report` reads it.
    ("profiler.analysis.compare", "profiler.reports.summary"): "load_summary() uses summary.load",
}


def discover(package: Path = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """Every module of the package: dotted name -> (file, is a package ``__init__``).

    ``profiler/reports`` and ``profiler/workloads`` are symbolic links in the repository, so
    links are followed.
    """
    found: dict[str, tuple[Path, bool]] = {}
    for folder, dirs, files in os.walk(package, followlinks=True):
        dirs[:] = sorted(d for d in dirs if (Path(folder) / d / "__init__.py").exists())
        for name in files:
            if not name.endswith(".py"):
                continue
            path = Path(folder) / name
            parts = list(path.relative_to(package.parent).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            found[".".join(parts)] = (path, is_package)
    return found


def _target(name: str, modules: Mapping[str, object]) -> str | None:
    """The most specific module of ours that importing ``name`` reaches, or None."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(
    module: str, source: str, is_package: bool, modules: Mapping[str, object]
) -> dict[str, int]:
    """The modules of ours that ``module`` imports anywhere in ``source``: name -> first line."""
    here = module if is_package else module.rpartition(".")[0]
    out: dict[str, int] = {}
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                origin = ".".join([*base, *([node.module] if node.module else [])])
            else:
                origin = node.module or ""
            for alias in node.names:
                full = f"{origin}.{alias.name}"
                names.append(full if full in modules else origin)
        for name in names:
            target = _target(name, modules)
            if target is not None and target != module:
                out.setdefault(target, node.lineno)
    return out


def build_graph(package: Path = PACKAGE) -> dict[str, dict[str, int]]:
    """The package's import graph: module -> {imported module: line of the first import}."""
    modules = discover(package)
    return {
        name: imports_of(name, path.read_text(encoding="utf-8"), is_package, modules)
        for name, (path, is_package) in modules.items()
    }


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def layer_of(module: str) -> tuple[int, str]:
    """(rank, layer name) of the longest ``LAYERS`` prefix matching ``module``."""
    best: tuple[int, int, str] | None = None
    for rank, (layer, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            fits = module == prefix or (prefix != "profiler" and module.startswith(prefix + "."))
            if fits and (best is None or len(prefix) > best[0]):
                best = (len(prefix), rank, layer)
    if best is None:
        raise LookupError(f"{module} is in no layer of LAYERS: place it")
    return best[1], best[2]


def upward(graph: Mapping[str, Mapping[str, int]]) -> list[tuple[str, str, int, str]]:
    """Every arrow to a higher layer: (importer, imported, line, 'layer -> layer')."""
    out = []
    for module, targets in sorted(graph.items()):
        rank, layer = layer_of(module)
        for target, line in sorted(targets.items()):
            target_rank, target_layer = layer_of(target)
            if target_rank > rank:
                out.append((module, target, line, f"{layer} -> {target_layer}"))
    return out


@pytest.fixture(scope="module")
def graph() -> dict[str, dict[str, int]]:
    return build_graph()


def test_the_graph_is_read(graph):
    # A parser that silently read nothing would pass everything below.
    assert len(graph) > 100
    assert "profiler.reports.summary" in graph  # through the symbolic link
    assert "profiler.processes.pipeline" in graph["profiler.cli"]
    assert "profiler.model.atomic" in graph["profiler.model.trace"]  # relative or function-local


def test_no_cycles(graph):
    found = cycles(graph)
    detail = []
    for component in found:
        members = set(component)
        arrows = [
            f"    {a} -> {b} (line {graph[a][b]})"
            for a in component
            for b in sorted(graph[a])
            if b in members
        ]
        detail.append(" <-> ".join(component) + "\n" + "\n".join(arrows))
    assert not found, f"{len(found)} import cycle(s):\n" + "\n".join(detail)


def test_every_module_has_a_layer(graph):
    for module in graph:
        layer_of(module)


def test_imports_point_down(graph):
    bad = [u for u in upward(graph) if (u[0], u[1]) not in EXCEPTIONS]
    assert not bad, f"{len(bad)} import(s) up a layer:\n" + "\n".join(
        f"    {a} -> {b} (line {line}; {layers})" for a, b, line, layers in bad
    )


def test_exceptions_are_still_needed(graph):
    used = {(u[0], u[1]) for u in upward(graph)}
    stale = sorted(set(EXCEPTIONS) - used)
    assert not stale, f"exceptions no longer needed, remove them: {stale}"


def test_checks_can_fail():
    toy = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}, "d": {"a": 4}}
    assert cycles(toy) == [["a", "b", "c"]]
    assert cycles({"a": {"b": 1}, "b": {}}) == []
    modules = {"profiler.x": 0, "profiler.x.y": 0, "profiler.z": 0}
    source = "from . import y\nfrom .y import f\ndef g():\n    import profiler.z.w\n"
    assert imports_of("profiler.x", source, True, modules) == {"profiler.x.y": 1, "profiler.z": 4}
    assert upward({"profiler.model.trace": {"profiler.cli": 9}}) == [
        ("profiler.model.trace", "profiler.cli", 9, "model -> entry")
    ]
    assert layer_of("profiler.capture.experiments")[1] == "casestudy_processes"
    assert layer_of("profiler.capture.loop")[1] == "capture"
    with pytest.raises(LookupError):
        layer_of("profiler_other")
