"""The command line: parse -> run -> render. Thin by design.

Commands::

    python -m profiler run [WORKLOAD ...] [options]   profile workloads (default: the suite)
    python -m profiler list                           registered workloads
    python -m profiler compare A B                    A vs B by category (workloads or runs)
    python -m profiler report RUN                     re-render RUN's report from its summary
    python -m profiler setup                          fetch the report's charting library

Exit status: 0 everything ran; 1 the run was written but a workload failed or timed out;
2 bad input (unknown workload, bad number); 3 the output folder cannot be written;
130 interrupted (the partial run folder is kept).

Nothing here imports numpy or TensorFlow, so ``--help`` answers at once.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

EXIT_DOC = """exit status:
  0    every workload ran
  1    the run was written, but a workload failed or timed out
  2    bad input: unknown workload, a number out of range
  3    the output folder cannot be created or written
  130  interrupted (Ctrl-C); the partial run folder is kept"""


class UsageError(Exception):
    """A user mistake: reported as one line, exit status 2."""


def _positive_int(text: str) -> int:
    """A positive integer; ``1e5`` is accepted (the seeds write step counts that way)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if not value.is_integer() or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return int(value)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m profiler",
        description="Where does a training step's time go? Profiles numpy and TensorFlow "
        "training loops and attributes every step's wall time to a named cause.",
        epilog=EXIT_DOC,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="profile workloads (default: the whole suite)",
        description="Profile registered workloads, each in its own process, and write "
        "runs/<id>/ (summary.json, report.html, TensorBoard logdir, raw artefacts).",
        epilog=EXIT_DOC,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "targets",
        nargs="*",
        metavar="WORKLOAD",
        help="registered workload names (e.g. tf1_gd or workloads.tf1_gd) or module:ATTR",
    )
    run.add_argument("--workloads", type=_csv, default=None, help="comma-separated names")
    run.add_argument("--phases", type=_csv, default=None, help="comma-separated phases")
    run.add_argument("--steps", type=_positive_int, help="steps in the timed window")
    run.add_argument("--n", type=_positive_int, help="problem size (training samples)")
    run.add_argument("--seed", type=int, help="random seed (seed-004 workloads)")
    run.add_argument(
        "--full", action="store_true", help="the seeds' own step counts (1e5 for seed 000)"
    )
    run.add_argument("--out", type=Path, default=Path("runs"), help="runs folder (default: runs)")
    run.add_argument(
        "--timeout", type=_positive_float, default=600.0, help="seconds per workload (600)"
    )
    run.add_argument("--warmup", type=_positive_int, default=50, help="warm-up steps (50)")
    run.add_argument(
        "--metric-points", type=_positive_int, default=20, help="loss points in the timed window"
    )
    run.add_argument(
        "--sample-rate",
        type=_positive_int,
        default=None,
        metavar="HZ",
        help="py-spy samples per second in the sampled phase (default 100)",
    )
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument(
        "--quick",
        action="store_true",
        help="half-length windows: a faster, noisier run (timed steps and phase windows / 2)",
    )
    run.add_argument(
        "--experiments",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run the counterfactual pairs and the size sweep among the selected workloads "
        "(default: on for the whole suite, off when workloads are named)",
    )
    run.add_argument(
        "--sweep-sizes",
        type=lambda t: [_positive_int(x) for x in _csv(t)],
        default=None,
        help="problem sizes for the sweep (default 10,100,1000,10000,100000)",
    )

    sub.add_parser("list", help="list registered workloads")
    sub.add_parser("setup", help="fetch the report's charting library (done by make)")

    cmp_ = sub.add_parser(
        "compare",
        help="why is A slower than B: the step-time difference by category",
        description="Compare two workloads of one run, or two runs. A and B are WORKLOAD (in "
        "--run), RUN (every workload both runs have) or RUN:WORKLOAD. Prints the difference "
        "per category; --json writes it as JSON (never into either run).",
    )
    cmp_.add_argument("a", metavar="A")
    cmp_.add_argument("b", metavar="B")
    cmp_.add_argument("--run", type=Path, default=Path("runs/latest"), help="default run")
    cmp_.add_argument("--json", type=Path, help="also write the comparison as JSON here")

    rep = sub.add_parser("report", help="re-render a run's report from its summary.json")
    rep.add_argument("run", type=Path, help="a run folder (e.g. runs/latest)")
    return parser


def _resolve_workloads(args: argparse.Namespace) -> list:  # type: ignore[type-arg]
    import workloads

    wanted = list(args.targets or []) + list(args.workloads or [])
    if not wanted:
        wanted = workloads.default_suite()
    specs = []
    for name in wanted:
        try:
            spec = workloads.resolve(name)
        except LookupError as exc:
            raise UsageError(str(exc)) from None
        if spec not in specs:
            specs.append(spec)
    return specs


def _phases(args: argparse.Namespace) -> list[str]:
    from profiler.model import PHASE_ORDER
    from profiler.phases import registry

    if not args.phases:
        return list(registry.DEFAULT_PHASES)
    known = registry.available()
    for p in args.phases:
        if p not in known:
            raise UsageError(f"unknown phase {p!r}; available: {', '.join(known)}")
    return [p for p in PHASE_ORDER if p in args.phases]


def cmd_run(args: argparse.Namespace) -> int:
    from profiler import pipeline, rundir
    from profiler.runner import RunOptions
    from reports import text, viewmodel
    from workloads.base import WorkloadError

    specs = _resolve_workloads(args)
    phases = _phases(args)
    params = {}
    for spec in specs:
        p = spec.defaults
        steps = args.steps or (spec.full_steps if args.full and spec.full_steps else p.steps)
        if args.quick and not args.steps:
            steps = max(steps // 2, 1)
        p = p.with_(steps=steps)
        if args.n:
            p = p.with_(n=args.n)
        if args.seed is not None:
            p = p.with_(seed=args.seed)
        try:
            p.validate()
        except WorkloadError as exc:
            raise UsageError(f"{spec.name}: {exc}") from None
        params[spec.name] = p
    opts = RunOptions(
        workloads=specs,
        params=params,
        phases=phases,
        out_root=args.out,
        timeout_s=args.timeout,
        warmup_steps=args.warmup,
        metric_points=args.metric_points,
        progress=not args.no_progress,
        options={
            **({"sample_rate": args.sample_rate} if args.sample_rate else {}),
            **({"time_scale": 0.5} if args.quick else {}),
        },
        experiments=(
            args.experiments
            if args.experiments is not None
            else not (args.targets or args.workloads)
        ),
        sweep_sizes=args.sweep_sizes or [],
    )
    try:
        result = pipeline.execute(opts)
    except rundir.RunDirError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return pipeline.EXIT_OUTPUT
    print(text.table(viewmodel.build(result.summary)))
    if result.status == "interrupted":
        print(f"\ninterrupted: partial results kept in {result.run_dir}", file=sys.stderr)
    else:
        print(f"\nreport: {result.report_path}")
    return result.exit_status


def cmd_list(_args: argparse.Namespace) -> int:
    import workloads

    suite = set(workloads.default_suite())
    for name in workloads.names():
        spec = workloads.get(name)
        mark = "" if name in suite else "  (not in the default suite)"
        print(f"{name:22s} seed {spec.seed}  {spec.framework:6s} {spec.title}{mark}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    import json

    from profiler import pipeline, summary

    path = args.run / "summary.json"
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{path} does not exist: is {args.run} a run folder?") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    try:
        pipeline.write_outputs(args.run, doc)
    except summary.SummaryError as exc:
        raise UsageError(f"{path}: {exc}") from None
    except OSError as exc:
        print(f"error: cannot write the report in {args.run}: {exc}", file=sys.stderr)
        return pipeline.EXIT_OUTPUT
    print(f"report: {args.run / 'report.html'}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    import json

    from profiler import compare, rundir
    from reports import text

    try:
        doc = compare.compare(args.a, args.b, args.run)
    except compare.CompareError as exc:
        raise UsageError(str(exc)) from None
    print(text.comparison(doc))
    if args.json:
        target = args.json.resolve()
        for side in (args.a, args.b, str(args.run)):
            run = compare.resolve(side, args.run)[0].resolve()
            if run == target.parent or run in target.parents:
                raise UsageError(f"--json {args.json} is inside the run {run}; write it elsewhere")
        try:
            rundir.atomic_write_text(args.json, json.dumps(doc, indent=1) + "\n")
        except OSError as exc:
            print(f"error: cannot write {args.json}: {exc}", file=sys.stderr)
            return 3
    return 0


def cmd_setup(_args: argparse.Namespace) -> int:
    from profiler import assets

    return assets.setup()


COMMANDS = {
    "run": cmd_run,
    "list": cmd_list,
    "report": cmd_report,
    "compare": cmd_compare,
    "setup": cmd_setup,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
