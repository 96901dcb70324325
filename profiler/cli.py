"""The command line: parse -> run -> render. Thin by design.

Commands::

    python -m profiler run [WORKLOAD ...] [options]   profile workloads (default: the suite)
    python -m profiler run [options] SCRIPT.py [ARGS] profile your own script, unchanged
    python -m profiler list                           registered workloads
    python -m profiler compare A B                    A vs B by category (workloads or runs)
    python -m profiler report RUN                     re-render RUN's report from its summary
    python -m profiler setup                          check the report's charting library

Exit status: 0 everything ran; 1 the run was written but a workload, or the experiments or
efficiency process, failed or timed out (a script raised or called ``sys.exit`` with a non-zero
status, a process was killed); 2 bad input (unknown workload, bad
number, a missing script or one that is not Python); 3 the output folder cannot be written;
4 ``compare --fail-above``: a workload's step regressed; 130 interrupted (the partial run folder
is kept).

Nothing here imports numpy or TensorFlow, so ``--help`` answers at once.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

# The grammar (argv -> RunOptions) lives below the entry points, where the pipeline can parse the
# case study's own script run too; its public names stay importable from here.
from profiler.processes.options import (
    UsageError,
    build_parser,
    parse_run,
    run_options,
    split_script,
)

__all__ = ["UsageError", "build_parser", "main", "parse_run", "run_options", "split_script"]

#: Exit statuses (``profiler.processes.options.EXIT_DOC``).
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_OUTPUT, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
#: ``compare --fail-above``: the regression gate failed (``options.EXIT_DOC``).
EXIT_REGRESSION = 4


def cmd_run(args: argparse.Namespace) -> int:
    from profiler import lifetime
    from profiler.model.text import shown
    from profiler.processes import orphans, pipeline, rundir
    from profiler.reports import text, viewmodel

    opts = run_options(args)
    script = args.script
    if script:
        print(
            f"profiling {shown(args.script[0])}: its output follows; the report is written when "
            "it ends",
            file=sys.stderr,
        )
    try:
        rundir.check_out(args.out)
        lifetime.install()  # SIGTERM and SIGHUP stop the run as Ctrl-C does
        orphans.adopt()  # what a script leaves running, even in a session of its own, ends
        result = pipeline.execute(opts)
    except rundir.RunDirError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return pipeline.EXIT_OUTPUT
    except OSError as exc:  # a full disk, a folder made read-only during the run
        print(
            f"error: cannot write the run under {args.out}: {exc.strerror or exc}", file=sys.stderr
        )
        return pipeline.EXIT_OUTPUT
    vm = viewmodel.build(result.summary)
    print(text.table(vm))
    for w in result.summary.get("workloads", []):
        if w.get("script"):
            print(f"{w['label']}: {w['script']['message']}")
    answer = text.answer(vm)
    if answer:
        print(f"\n{answer}")
    if result.status == "interrupted":
        print(f"\ninterrupted: partial results kept in {result.run_dir}", file=sys.stderr)
    else:
        print(f"\nreport: {result.report_path}")
    return result.exit_status


def cmd_list(_args: argparse.Namespace) -> int:
    from profiler import workloads

    suite = set(workloads.default_suite())
    for name in workloads.names():
        spec = workloads.get(name)
        mark = "" if name in suite else "  (not in the default suite)"
        print(f"{name:22s} seed {spec.seed}  {spec.framework:6s} {spec.title}{mark}")
    return 0


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def cmd_report(args: argparse.Namespace) -> int:
    from profiler.processes import pipeline
    from profiler.reports import summary

    path = args.run / "summary.json"
    if not path.is_file():
        raise UsageError(f"{path} does not exist: is {args.run} a run folder?")
    try:
        pipeline.rerender(args.run)
    except summary.SummaryError as exc:
        raise UsageError(f"{path}: {exc}") from None
    except OSError as exc:
        print(f"error: cannot write the report in {args.run}: {exc}", file=sys.stderr)
        return pipeline.EXIT_OUTPUT
    except ValueError as exc:
        raise UsageError(f"cannot read {path}: {_one_line(exc)}") from None
    except Exception as exc:  # it passes the schema but holds what no run writes
        raise UsageError(
            f"{path} holds a value no run writes, so the report cannot be drawn from it "
            f"({type(exc).__name__}: {_one_line(exc)})"
        ) from None
    print(f"report: {args.run / 'report.html'}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    import json

    from profiler.analysis import compare
    from profiler.processes import rundir
    from profiler.reports import text

    try:
        doc = compare.compare(args.a, args.b, args.run, args.fail_above)
        table = text.comparison(doc)
        body = json.dumps(doc, indent=1, allow_nan=False)  # JSON has no NaN: refuse to write one
    except compare.CompareError as exc:
        raise UsageError(str(exc)) from None
    except Exception as exc:  # valid summaries (as `report` checks them) holding what no run writes
        raise UsageError(
            f"{args.a} and {args.b}: a summary holds a value no run writes, so they cannot be "
            f"compared ({type(exc).__name__}: {_one_line(exc)})"
        ) from None
    status = EXIT_REGRESSION if doc.get("gate", {}).get("failed") else EXIT_OK
    if args.json == "-":
        # stdout is the JSON alone (for jq, a CI step); the text stays readable in the log.
        print(table, file=sys.stderr)
        print(body)
        return status
    print(table)
    if args.json:
        path = Path(args.json)
        target = path.resolve()
        for side in (args.a, args.b, str(args.run)):
            run = compare.resolve(side, args.run)[0].resolve()
            if run == target.parent or run in target.parents:
                raise UsageError(f"--json {path} is inside the run {run}; write it elsewhere")
        try:
            rundir.atomic_write_text(path, body + "\n")
        except OSError as exc:
            print(f"error: cannot write {path}: {exc}", file=sys.stderr)
            return EXIT_OUTPUT
    return status


def cmd_capture(args: argparse.Namespace) -> int:
    from profiler.processes import capture, pipeline, rundir
    from profiler.reports import text, viewmodel

    if args.script:
        raise UsageError(f"capture takes addresses, not a script: {args.script[0]}")
    try:
        addresses = capture.parse_addresses(args.addresses)
        capture.check_tensorflow()
        capture.check_reachable(addresses)
    except capture.CaptureError as exc:
        raise UsageError(f"capture: {exc}") from None
    print(
        f"capturing {len(addresses)} worker{'s' if len(addresses) > 1 else ''} for "
        f"{args.duration_ms} ms ...",
        file=sys.stderr,
    )
    try:
        rundir.check_out(args.out)
        result = capture.run(addresses, args.duration_ms, args.out)
    except rundir.RunDirError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return pipeline.EXIT_OUTPUT
    vm = viewmodel.build(result.summary)
    print(text.table(vm))
    answer = text.answer(vm)
    if answer:
        print(f"\n{answer}")
    print(f"\nreport: {result.report_path}")
    return result.exit_status


def cmd_setup(_args: argparse.Namespace) -> int:
    """Nothing to fetch: check that plotly.js is installed (0), or say how to install it (1)."""
    from profiler import assets

    return assets.setup()


COMMANDS = {
    "run": cmd_run,
    "list": cmd_list,
    "report": cmd_report,
    "compare": cmd_compare,
    "setup": cmd_setup,
    "capture": cmd_capture,
}


def main(argv: Sequence[str] | None = None) -> int:
    # A path with bytes that are not UTF-8 (a run folder under such a folder) is printed as
    # Python's stderr prints it, not a UnicodeEncodeError after the run (a UTF-8 locale's
    # stdout is strict; the C locale's already writes the bytes back).
    if getattr(sys.stdout, "errors", None) == "strict" and hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="backslashreplace")
    parser = build_parser()
    ours, script, note = split_script(parser, list(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(ours)
    args.script = script
    if note:
        print(note, file=sys.stderr)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        from profiler import lifetime

        print("interrupted", file=sys.stderr)
        return lifetime.exit_status(exc)
