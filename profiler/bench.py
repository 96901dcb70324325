"""``make bench``: this machine's figures for the project's speed and overhead goals.

Place in the pipeline: a consumer of ``summary.json``. It runs the default suite (or reads a
finished run with ``--run``) and prints, with the goal next to each figure:

* the suite's wall time (goal: under 3 minutes);
* each workload's step-marker cost as a share of its median step (goal: ≤ 2%);
* each instrumented phase's slow-down of the step (its median over the timed median);
* each experiment pair's predicted and measured saving and the error
  (goal: within max(25%, 3 µs) of the measurement);
* per script of the real-world corpus (``profiler.bench_scripts``): its wall time alone and
  profiled with default options, the phases that ran, the start-up capture's cost;
* multi-worker jobs (``profiler.bench_jobs``): 1 and 2 workers, and an injected straggler's
  delay against what the job analysis attributes to it.

Benchmarks print figures; they do not fail on a missed goal (tests check correctness; these are
measurements of a noisy machine). The exit status is 0 unless the run itself could not be made.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

SUITE_GOAL_S = 180.0
MARKER_GOAL = 0.02


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _sized(p: dict[str, Any]) -> str:
    """A pair's interval, its block pairs and the verdict they support ('' for an older run)."""
    if p.get("pairs") is None:
        return ""
    span = p.get("interval_us")
    low_high = "no interval" if span is None else f"{span[0]:.1f} to {span[1]:.1f}"
    return f"  ({low_high}, {p['pairs']} pairs: {p.get('verdict')})"


def report(doc: dict[str, Any], wall_s: float | None = None) -> str:
    lines = []
    run = doc["run"]
    wall = wall_s if wall_s is not None else run["wall_s"]
    verdict = "meets" if wall < SUITE_GOAL_S else "MISSES"
    lines.append(f"suite wall time: {wall:.1f} s ({verdict} the {SUITE_GOAL_S:.0f} s goal)")
    lines.append("")
    lines.append("step-marker cost (goal ≤ 2% of a step) and phase slow-downs (phase / timed):")
    phases = [p for p in run["phases"] if p != "timed"]
    header = f"  {'workload':20s} {'µs/step':>9s} {'marker ns':>9s} {'share':>7s}  " + "  ".join(
        f"{p:>9s}" for p in phases
    )
    lines.append(header)
    for w in doc["workloads"]:
        st = w.get("step_time") or {}
        marker = w.get("marker") or {}
        infl = {p["name"]: p["inflation"] for p in w.get("phases", [])}
        share = marker.get("share_of_step")
        flag = "" if share is None or share <= MARKER_GOAL else " !"
        lines.append(
            f"  {w['label'][:20]:20s} {_fmt(st.get('median_us'), '9.1f')} "
            f"{_fmt(marker.get('cost_ns'), '9d')} {_fmt(share and share * 100, '6.2f')}%{flag:2s}"
            + "  ".join(
                f"{infl[p]:8.2f}×" if infl.get(p) is not None else f"{'-':>9s}" for p in phases
            )
        )
    x = doc.get("experiments")
    if x:
        lines.append("")
        lines.append("experiments: saving per training step, predicted vs measured (µs)")
        lines.append(
            f"  {'pair':36s} {'predicted':>9s} {'measured':>9s} {'error':>8s} {'resol.':>7s}  goal"
            "  (95% interval, block pairs: verdict)"
        )
        for p in x["pairs"]:
            if p["status"] != "ok":
                lines.append(f"  {p['name'][:36]:36s} failed: {p['error']}")
                continue
            if p["below_resolution"]:
                goal = "below resolution"
            elif p["within_goal"] is None:
                goal = "no prediction"
            else:
                goal = "within" if p["within_goal"] else "OUTSIDE"
            lines.append(
                f"  {p['name'][:36]:36s} {_fmt(p['predicted_saving_us'], '9.1f')} "
                f"{_fmt(p['measured_saving_us'], '9.1f')} {_fmt(p['error_us'], '8.1f')} "
                f"{_fmt(p['resolution_us'], '7.2f')}  {goal}{_sized(p)}"
            )
        for name, s in x["sweep"].items():
            fit = s.get("fit")
            if fit:
                lines.append(
                    f"  sweep {name}: a = {fit['a_us']:.1f} µs, b = {fit['b_ns_per_sample']:.2f} "
                    f"ns/sample over n = {fit['n_min']:,}–{fit['n_max']:,}"
                )
        if x.get("crossover"):
            lines.append(f"  crossover: {x['crossover']['note']}")
    return "\n".join(lines)


#: Flags for a headless Chromium on a machine with no network: without
#: the networking ones it stalls on blocked connections.
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
LOAD_GOAL_S = 2.0
RENDER_GOAL_S = 3.0


def browser_timing(report: Path) -> str:
    """Load and render times of ``report`` in headless Chromium, against the goals."""
    import shutil

    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "report in a browser: playwright is not installed (pip install -e '.[dev]')"
    chromium = shutil.which("chromium")
    if chromium is None:
        return "report in a browser: no chromium (make browser installs Debian's)"
    loads, renders = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=list(CHROMIUM_ARGS))
        for _ in range(3):
            page = browser.new_page()
            t0 = time.perf_counter()
            page.goto(report.resolve().as_uri(), wait_until="load")
            loads.append(time.perf_counter() - t0)
            page.wait_for_function("document.body.getAttribute('data-charts-rendered') !== null")
            renders.append(time.perf_counter() - t0)
            page.close()
        browser.close()
    load, render = sorted(loads)[1], sorted(renders)[1]
    size = report.stat().st_size / 1e6
    return (
        f"report: {size:.2f} MB (goal ≤ 5), loads in {load:.2f} s (goal < {LOAD_GOAL_S:g}), "
        f"renders in {render:.2f} s (goal < {RENDER_GOAL_S:g}); medians of 3 in headless Chromium"
    )


def memory_cost() -> str:
    """What the memory sampler costs (``profiler.capture.memory``): one sample, and the share
    of a run its thread takes at its rate (goal: under 1% of a step's time)."""
    from profiler.capture import memory

    ns = memory.overhead_ns()
    share = ns / (memory.INTERVAL_S * 1e9)
    return (
        f"memory sampling: {ns:,} ns a sample, every {memory.INTERVAL_S * 1e3:g} ms: "
        f"{100 * share:.3f}% of the run's time "
        f"({'meets' if share < 0.01 else 'MISSES'} the 1% goal)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m profiler.bench", description=__doc__)
    parser.add_argument("--run", type=Path, help="read this finished run instead of running")
    parser.add_argument("--out", type=Path, default=Path("runs"), help="runs folder")
    parser.add_argument(
        "--scripts",
        nargs="*",
        type=Path,
        default=None,
        metavar="SCRIPT",
        help="only the scripts' table: these scripts, or (none given) the real-world corpus "
        "and the seed-000 scripts",
    )
    parser.add_argument("--no-scripts", action="store_true", help="skip the scripts' table")
    parser.add_argument(
        "--jobs", action="store_true", help="only the multi-worker jobs' table (run --workers)"
    )
    parser.add_argument("--no-jobs", action="store_true", help="skip the multi-worker jobs")
    parser.add_argument(
        "--noise",
        nargs="*",
        type=Path,
        default=None,
        metavar="SCRIPT",
        help="only the noise harness: these scripts (none given: the short scripts, the corpus "
        "and the seed TF1 script) profiled quiet and beside a busy process",
    )
    args = parser.parse_args(argv)
    if args.noise is not None:
        from profiler import bench_noise

        print(bench_noise.main(args.noise or None))
        return 0
    if args.jobs:
        from profiler import bench_jobs

        print(bench_jobs.main())
        return 0
    if args.scripts is not None:
        from profiler import bench_scripts

        print(bench_scripts.main(args.scripts or bench_scripts.default_corpus()))
        return 0
    if args.run:
        doc = json.loads((args.run / "summary.json").read_text())
        print(report(doc))
        print(browser_timing(args.run / "report.html"))
        return 0
    from profiler.cli import main as cli_main
    from profiler.processes import pipeline

    t0 = time.monotonic()
    status = cli_main(["run", "--out", str(args.out)])
    wall = time.monotonic() - t0
    if status not in (pipeline.EXIT_OK, pipeline.EXIT_WORKLOAD_FAILED):
        return status
    latest = args.out / "latest"
    doc = json.loads((latest / "summary.json").read_text())
    print()
    print(report(doc, wall_s=wall))
    print(browser_timing(latest / "report.html"))
    print(memory_cost())
    if not args.no_scripts:
        from profiler import bench_scripts

        print()
        print(bench_scripts.main(bench_scripts.default_corpus()))
    if not args.no_jobs:
        from profiler import bench_jobs

        print()
        print(bench_jobs.main())
    return 0


if __name__ == "__main__":
    sys.exit(main())
