"""Real public training scripts (``tests/realworld``), profiled with default options: the finding
that names each one's problem fires on it, and stays silent on its fixed version.

Each script's header says where it comes from, how it was adapted (synthetic data of the same
shape instead of a download) and its truth: the problem, measured without the profiler
(``tests/realworld/manifest.json``). ``--max-steps`` only where the answer does not depend on the
steps after it (it keeps the runs short); everything else is the profiler's defaults.

The quick cases run in ``make test``; ``make realworld`` runs every case.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from profiler.reports import summary
from tests.test_script_run import REPO, cli, only_run

CORPUS = REPO / "tests" / "realworld"


#: The finding's cost per step against the pathology's cost measured without the profiler
#: (``manifest.json``: the broken step less the fixed one): within this factor either way. The
#: manifest's figures were taken on a loaded machine whose step times moved up to 2x between
#: sessions, and a finding's cost is what the pathology takes, not exactly what its fix saves.
COST_FACTOR = 2.5


@dataclass(frozen=True)
class Case:
    """One script: the finding that must fire (``fires``, "" for none), the ones that must not,
    words its fix must hold (``{line:TEXT}``: the line number of the script's line holding
    TEXT), extra options; ``cost``: how the finding's cost compares with the manifest's
    pathology cost (``cost_us``, or a regular expression over its message giving ms)."""

    script: str
    fires: str
    silent: tuple[str, ...] = ()
    fix_has: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    quick: bool = False
    also: dict[str, str] = field(default_factory=dict)
    cost: str = ""


CASES = (
    Case(
        "nielsen_network.py",
        "per_sample_loop",
        fix_has=("loop at line {line:for x, y in mini_batch:}",),
        # The one case `make test` runs: cut to 1,500 steps there for the suite's time (every
        # other case runs as a newcomer runs it, with no options).
        args=("--max-steps", "1500"),
        quick=True,
        cost="cost_us",
    ),
    Case("nielsen_network_fixed.py", "", silent=("per_sample_loop",)),
    Case(
        "keras_fashion_predict_loop.py",
        "predict_in_loop",
        fix_has=("model(x, training=False)",),
        cost=r"([\d,.]+) ms a call",
    ),
    Case("keras_fashion_predict_loop_fixed.py", "", silent=("predict_in_loop",)),
    Case(
        "tf_data_input_bound.py",
        "input_bound",
        fix_has=(".cache() right after map(mapped_function)", "hard_preprocessing"),
        silent=("overhead_bound_keras",),
        cost="cost_us",
    ),
    Case(
        # Its first epoch runs the map and fills the cache (47-50 ms a step, ~90% of the loop,
        # without the profiler); the later two read it at 3.2-5.2 ms a step, of which
        # steps_per_execution=16 saved 1.1-2.1 ms (fit's per-batch machinery: no longer silent
        # since the windows run in those epochs).
        "tf_data_input_bound_fixed.py",
        "cache_fill",
        fix_has=("map(mapped_function)", ".cache(filename)"),
        also={"no_cache_advice": ".cache() right after"},
    ),
    Case(
        "tf_function_retracing.py",
        "retracing",
        fix_has=("step",),
        cost="cost_us",
    ),
    Case(
        "tf_function_retracing_fixed.py",
        "",
        silent=("retracing", "steady_tracing"),
    ),
    Case("tf1_graph_growth.py", "graph_growth", fix_has=("finalize",), cost="cost_us"),
    Case("tf1_graph_growth_fixed.py", "", silent=("graph_growth", "steps_slow_down")),
    Case("tf2_eager_tensorboard.py", "eager_dispatch", fix_has=("tf.function",), cost="cost_us"),
    Case("tf2_eager_tensorboard_fixed.py", "", silent=("eager_dispatch",)),
    Case(
        "keras_overfit_per_epoch.py",
        "per_epoch_cost",
        fix_has=("validation_freq",),
        cost="cost_us",
    ),
    Case("keras_overfit_per_epoch_fixed.py", "", silent=("per_epoch_cost",)),
)


def _expand(words: str, script: str) -> str:
    """``{line:TEXT}`` -> the number of the script's first line holding TEXT."""

    def number(m: re.Match[str]) -> str:
        lines = (CORPUS / script).read_text().splitlines()
        return str(next(i for i, ln in enumerate(lines, 1) if m.group(1) in ln))

    return re.sub(r"\{line:([^}]*)\}", number, words)


def _truth(script: str) -> tuple[float, float | None]:
    """The pathology's cost per step (µs) measured without the profiler, and the step's own
    median then (None where the manifest has none)."""
    import statistics

    entries = json.loads((CORPUS / "manifest.json").read_text())
    truth = next(e for e in entries if e["file"] == script)["truth"]
    steps = truth.get("step_us_runs")
    return float(truth["pathology_cost_us"]), statistics.median(steps) if steps else None


def _params() -> list:  # type: ignore[type-arg]
    return [
        pytest.param(c, id=c.script, marks=[] if c.quick else [pytest.mark.realworld])
        for c in CASES
    ]


@pytest.mark.tf
@pytest.mark.slow
@pytest.mark.parametrize("case", _params())
def test_the_finding_that_names_the_scripts_problem(case: Case, tmp_path: Path) -> None:
    out = cli(tmp_path, *case.args, str(CORPUS / case.script), timeout=420)
    assert out.returncode == 0, out.stderr[-3000:]
    run = only_run(tmp_path)
    doc = json.loads((run / "summary.json").read_text())
    summary.validate(doc)
    (w,) = doc["workloads"]
    assert w["script"]["steps"] > 0, w["script"]["message"]
    found = {d["rule"]: d for d in doc["diagnoses"] if d["name"] == w["name"]}
    if case.fires:
        assert case.fires in found, (sorted(found), out.stdout[-3000:])
        d = found[case.fires]
        for words in case.fix_has:
            assert _expand(words, case.script) in d["message"] + d["fix"], d
        if case.cost:
            truth, truth_step = _truth(case.script)
            if case.cost == "cost_us":
                cost = d["cost_us"]
            else:
                m = re.search(case.cost, d["message"])
                assert m, d["message"]
                cost = 1e3 * float(m.group(1).replace(",", ""))
            step = w["step_time"]["median_us"]
            if case.cost == "cost_us" and truth_step and step:
                # A ratio in each run, not µs measured hours apart on a noisy machine: the
                # share of the step the finding gives against the share measured alone.
                cost, truth = cost / step, truth / truth_step
            assert truth / COST_FACTOR <= cost <= truth * COST_FACTOR, (cost, truth, d)
        # The terminal's answer shows it.
        assert d["message"] in out.stdout
    for rule in case.silent:
        assert rule not in found, (rule, found.get(rule))
    for words in case.also.values():
        assert all(words not in d["fix"] for d in found.values()), found
