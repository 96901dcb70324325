"""The ``python -m profiler`` command line's grammar: argv -> ``RunOptions``.

Place in the pipeline: below the entry points. ``profiler.cli`` parses with it and dispatches the
commands; the pipeline parses the case study's own script run with it
(``profiler.processes.pipeline.run_seed_whatifs``), and the IPython magics and ``profile()`` read
their options with ``parse_run``. A mistake is a ``UsageError``: one line, exit status 2.

Nothing here imports numpy or TensorFlow, so ``--help`` answers at once.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

EXIT_DOC = """exit status:
  0    every workload ran (a script: it returned, called sys.exit(0) or reached --max-steps)
  1    the run was written, but a workload failed or timed out (a script raised, or called
       sys.exit with another status: the report has the traceback's tail and the steps done),
       or the experiments or efficiency process did (one line says which, and why)
  2    bad input: unknown workload, a number out of range, a missing script or one that is
       not Python, a bad --step-function/--step-line, a capture address that is malformed
       or does not answer; nothing is written
  3    the output folder cannot be created or written
  4    compare --fail-above PCT: a workload's step regressed by more than PCT percent
  130  interrupted (Ctrl-C); the partial run folder is kept"""

SCRIPT_DOC = """your own script:
  python -m profiler run [options] path/to/script.py [its arguments]
  runs the script unchanged, as __main__ with its own sys.argv, in the current folder, its
  output on the terminal (and in workloads/<script>/stdout.log), its stdin not connected
  (--stdin FILE gives it one). Steps are found automatically for TF1 Session.run calls,
  tf.function calls and Keras fit batches, and otherwise from the script's loops (the one
  whose iterations look like training steps; --no-auto-step: off); name them yourself with
  --step-function, --step-line or `with profiler.step():` in the script. Options go before
  the script: what follows it is the script's."""


class UsageError(Exception):
    """A user mistake: reported as one line, exit status 2."""


#: The largest count an option takes (steps, sizes, points): beyond it, a typo.
MAX_COUNT = 10**12


def _positive_int(text: str) -> int:
    """A positive integer up to ``MAX_COUNT``; ``1e5`` is accepted (the seeds write step counts
    that way)."""
    try:
        value = float(text)
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if not value.is_integer() or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    if value > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_COUNT:.0e}, got {text!r}")
    return int(value)


def _count(text: str) -> int:
    """A small non-negative integer (``--repeat``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if not 0 <= value <= 10:
        raise argparse.ArgumentTypeError(f"must be between 0 and 10, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def _percent(text: str) -> float:
    """A finite, non-negative percentage (``--fail-above``)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a non-negative number (percent), got {text!r}")
    return value


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, with where the help is (exit status 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see: {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m profiler",
        description="Where does a training step's time go? Profiles numpy and TensorFlow "
        "training loops and attributes every step's wall time to a named cause.",
        epilog=EXIT_DOC,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="profile workloads (default: the whole suite) or your own script",
        description="Profile registered workloads or your own script (SCRIPT.py [ARGS]), each "
        "in its own process, and write runs/<id>/ (summary.json, report.html, TensorBoard "
        "logdir, raw artefacts).",
        epilog=f"{SCRIPT_DOC}\n\n{EXIT_DOC}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "targets",
        nargs="*",
        metavar="WORKLOAD",
        help="registered workload names (e.g. tf1_gd or workloads.tf1_gd) or module:ATTR; "
        "then, optionally, SCRIPT.py and its arguments",
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
        "--timeout",
        type=_positive_float,
        default=None,
        help="seconds per workload (600; a script: no limit unless given)",
    )
    run.add_argument(
        "--warmup",
        type=_positive_int,
        default=None,
        help="warm-up steps (a workload: 50; a script: ~0.3 s of steps, 3 to 20)",
    )
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
    script = run.add_argument_group("your own script (SCRIPT.py)")
    script.add_argument(
        "--step-function",
        metavar="NAME",
        help="each call of the script's function NAME (or Class.method) is one step",
    )
    script.add_argument(
        "--step-line",
        metavar="[FILE:]LINE",
        help="each execution of the script's line LINE is a step boundary (a line inside the "
        "training loop, or the loop's own for/while line)",
    )
    script.add_argument(
        "--whatif",
        choices=("on", "all"),
        default="on",
        help="the what-if phase: apply each fix that applies to the loop for a few hundred "
        "steps and measure what it saves (on: the fixes that keep the training's results, and "
        "a numpy script's float32 blocks, which round its arrays to float32 precision for those "
        "steps only; all: also those that may change them, e.g. an eager step in tf.function)",
    )
    script.add_argument(
        "--whatif-only",
        metavar="ID[,ID...]",
        help="run only these what-ifs (ids as in profiler/docs/findings.md's table, e.g. "
        "keras_steps_16)",
    )
    script.add_argument(
        "--no-whatif",
        dest="whatif",
        action="store_const",
        const="off",
        help="skip the what-if phase",
    )
    script.add_argument(
        "--no-auto-step",
        dest="auto_step",
        action="store_false",
        help="without framework steps or marks, do not choose one of the script's loops as the "
        "steps (by default the loop whose iterations look like training steps is chosen)",
    )
    script.add_argument(
        "--max-steps",
        type=_positive_int,
        metavar="N",
        help="stop the script after N detected steps, keeping everything measured (the phases' "
        "windows are sized to fit into N steps)",
    )
    script.add_argument(
        "--repeat",
        type=_count,
        default=None,
        metavar="N",
        help="run the script up to N more times while phases that apply to it got no steps "
        "(it ended first): each run measures the phases still missing (default: as many runs "
        "as fit in 3x the script's own time + 20 s, 1.5x + 15 s from 30 s; 0: never)",
    )
    script.add_argument(
        "--graph-mode",
        "--tf1",
        dest="graph_mode",
        action="store_true",
        help="call tf.compat.v1.disable_eager_execution() before the script starts (TF1-era "
        "scripts that build graphs and run Sessions without doing it themselves)",
    )
    script.add_argument(
        "--workers",
        type=_positive_int,
        default=1,
        metavar="N",
        help="run N processes of the script as the workers of one tf.distribute job on this "
        "machine (each with its TF_CONFIG, ports on 127.0.0.1, in a private network namespace "
        "where allowed), each profiled, attributed per worker with the stragglers named",
    )
    script.add_argument(
        "--worker-stall",
        type=_positive_float,
        default=None,
        metavar="S",
        help="with --workers: a job in which no worker finishes a step for S seconds is hung "
        "and stopped, each worker recorded as hung (default 120)",
    )
    script.add_argument(
        "--stdin", type=Path, metavar="FILE", help="give the script FILE as its standard input"
    )

    cap = sub.add_parser(
        "capture",
        help="profile a job already running elsewhere through its workers' profiler servers",
        description="Ask every worker of a running tf.distribute job (each started "
        "tf.profiler.experimental.server.start(PORT)) for the same D ms of trace, through "
        "TensorFlow's profiler client, and write runs/<id>/ with one workload per worker, "
        "attributed from its kernels, and the job's straggler named.",
        epilog=EXIT_DOC,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cap.add_argument(
        "addresses",
        metavar="grpc://HOST:PORT[,grpc://HOST:PORT...]",
        help="the workers' profiler servers, in task order",
    )
    cap.add_argument(
        "--duration-ms",
        type=_positive_int,
        default=2000,
        metavar="D",
        help="milliseconds of trace from each worker (default 2000)",
    )
    cap.add_argument("--out", type=Path, default=Path("runs"), help="runs folder (default: runs)")

    sub.add_parser("list", help="list registered workloads")
    sub.add_parser(
        "setup",
        help="check that the report's charting library (plotly.js, from the plotly package) "
        "is installed: print its version and path",
    )

    cmp_ = sub.add_parser(
        "compare",
        help="why is A slower than B: the step-time difference by category",
        description="Compare two workloads of one run, or two runs. A and B are WORKLOAD (in "
        "--run), RUN (every workload both runs have) or RUN:WORKLOAD. Prints the difference "
        "per category; --json writes it as JSON (never into either run). With --fail-above "
        "PCT it is a regression gate: exit status 4 when B's typical step is slower than A's "
        "by more than PCT percent beyond the 95%% interval of the change.",
        epilog="exit status:\n  0    compared (the gate, if given, passed: within PCT, faster or "
        "inconclusive)\n  2    bad input: a bad PCT, A or B not a run or workload\n  3    "
        "--json FILE cannot be written\n  4    --fail-above PCT: a workload regressed",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmp_.add_argument("a", metavar="A")
    cmp_.add_argument("b", metavar="B")
    cmp_.add_argument("--run", type=Path, default=Path("runs/latest"), help="default run")
    cmp_.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="FILE",
        help="also write the comparison as JSON to FILE; without FILE (or -, after A and B): "
        "print it on stdout alone, the text going to stderr",
    )
    cmp_.add_argument(
        "--fail-above",
        type=_percent,
        metavar="PCT",
        help="exit 4 when B's typical step is slower than A's by more than PCT percent and "
        "the change's 95%% interval lies above PCT (one line per workload says which)",
    )

    rep = sub.add_parser("report", help="re-render a run's report from its summary.json")
    rep.add_argument("run", type=Path, help="a run folder (e.g. runs/latest)")
    return parser


#: ``run`` options that apply to a script only.
SCRIPT_OPTIONS = ("step_function", "step_line", "max_steps", "graph_mode", "stdin", "repeat")
#: ``run`` options that apply to a script only and are on by default (given: False).
SCRIPT_SWITCHES = ("auto_step",)
#: ``--workers`` at most (processes of one job on this machine).
MAX_WORKERS = 16


def split_script(
    parser: argparse.ArgumentParser, argv: list[str]
) -> tuple[list[str], list[str], str]:
    """Split ``run``'s arguments at the script: (ours, [script, its arguments...], a note).

    The script is the first positional argument that ends in ``.py`` or names a file; what
    follows it is the script's own, options included, as with ``python script.py ...``. One
    convenience: when every argument after a script that reads no command line (no
    ``sys.argv``, ``argparse``, ``flags`` ...) is one of ``run``'s own options, they are taken as
    ours and the note says so. Values of our options (``--out DIR``) are never the script.
    """
    if not argv or argv[0] != "run":
        return argv, [], ""
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    run = commands.choices["run"]
    actions = run._option_string_actions
    takes_value = {opt for opt, action in actions.items() if action.nargs != 0}
    i = 1
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return argv[:i], argv[i + 1 :], ""
        if token.startswith("-"):
            i += 2 if token in takes_value else 1
            continue
        if token.endswith(".py") or Path(token).is_file():
            break
        i += 1
    else:
        return argv, [], ""
    ours, script, rest = argv[:i], argv[i], argv[i + 1 :]
    flags = [t for t in rest if t.split("=", 1)[0] in actions]
    if not flags:
        return ours, [script, *rest], ""
    reads = _reads_arguments(script)
    if reads is None:  # not a script we can read: reported as bad input after parsing
        return ours, [script, *rest], ""
    if _all_options(rest, actions, takes_value) and not reads:
        note = (
            f"note: {Path(script).name} reads no command-line arguments, so "
            f"{' '.join(rest)} are the profiler's options (put them before the script)"
        )
        return [*ours, *rest], [script], note
    note = (
        f"note: {' '.join(flags)} after {Path(script).name} go to the script; the profiler's "
        "options go before the script"
    )
    return ours, [script, *rest], note


def _all_options(tokens: list[str], actions: dict[str, object], takes_value: set[str]) -> bool:
    i = 0
    while i < len(tokens):
        name = tokens[i].split("=", 1)[0]
        if name not in actions:
            return False
        i += 2 if name in takes_value and "=" not in tokens[i] else 1
    return i == len(tokens)


def _reads_arguments(script: str) -> bool | None:
    from profiler.capture.script import source

    try:
        return source.reads_arguments(source.load(Path(script)))
    except source.ScriptError:
        return None


def _script_spec(args: argparse.Namespace) -> object | None:
    """The script's spec (checked: bad input is a UsageError), or None without a script."""
    if not args.script:
        given = [o for o in SCRIPT_OPTIONS if getattr(args, o) not in (None, False, 0)]
        given += [f"no_{o}" for o in SCRIPT_SWITCHES if getattr(args, o) is False]
        if args.workers > 1:
            given.append("workers")
        if args.worker_stall:
            given.append("worker_stall")
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise UsageError(f"{flag} applies to a script: run [options] SCRIPT.py [its arguments]")
        return None
    from profiler.capture.script.source import ScriptError
    from profiler.capture.script.spec import ScriptSpec

    script, *argv = args.script
    if args.workers > MAX_WORKERS:
        raise UsageError(f"--workers {args.workers}: at most {MAX_WORKERS} on one machine")
    if args.worker_stall and args.workers < 2:
        raise UsageError("--worker-stall applies to a job: give --workers N as well")
    if args.workers > 1 and args.repeat is not None:
        raise UsageError("--repeat does not apply to a job of --workers (its workers run once)")
    try:
        return ScriptSpec.from_args(
            script,
            argv,
            step_function=args.step_function,
            step_line=args.step_line,
            max_steps=args.max_steps,
            graph_mode=args.graph_mode,
            stdin=args.stdin,
            steps=args.steps,
            auto_step=args.auto_step,
        )
    except ScriptError as exc:
        raise UsageError(str(exc)) from None


def _resolve_workloads(args: argparse.Namespace) -> list:  # type: ignore[type-arg]
    from profiler import workloads

    wanted = list(args.targets or []) + list(args.workloads or [])
    if not wanted and not args.script:
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
    from profiler.capture.phases import registry
    from profiler.model import PHASE_ORDER

    if not args.phases:
        return list(registry.DEFAULT_PHASES)
    known = registry.available()
    for p in args.phases:
        if p not in known:
            raise UsageError(f"unknown phase {p!r}; available: {', '.join(known)}")
    return [p for p in PHASE_ORDER if p in args.phases]


def run_options(args: argparse.Namespace) -> Any:
    """``RunOptions`` from the ``run`` command's arguments (bad input: ``UsageError``)."""
    from profiler.capture.loop import WorkloadError
    from profiler.processes.launch import RunOptions

    script = _script_spec(args)
    specs = _resolve_workloads(args)
    phases = _phases(args)
    params = {}
    if script is not None:
        specs.append(script)
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
        timeout_s=args.timeout or RunOptions.timeout_s,
        script_timeout_s=args.timeout,
        warmup_steps=args.warmup or RunOptions.warmup_steps,
        metric_points=args.metric_points,
        script_repeat=args.repeat,
        workers=args.workers,
        # A script's own output goes to the terminal: no bar to tear it apart.
        progress=not args.no_progress and script is None,
        options={
            **({"sample_rate": args.sample_rate} if args.sample_rate else {}),
            **({"time_scale": 0.5} if args.quick else {}),
            **({"warmup_fixed": True} if args.warmup else {}),
            "whatif": args.whatif,
            **({"whatif_only": args.whatif_only} if args.whatif_only else {}),
            **({"worker_stall_s": args.worker_stall} if args.worker_stall else {}),
        },
        experiments=(
            args.experiments
            if args.experiments is not None
            else not (args.targets or args.workloads or script)
        ),
        sweep_sizes=args.sweep_sizes or [],
    )
    return opts


def parse_run(tokens: Sequence[str], script: Sequence[str]) -> Any:
    """``RunOptions`` for ``run [tokens] SCRIPT [its arguments]`` given as lists, for callers
    inside a live process (the IPython magics): a mistake raises ``UsageError`` with the
    one-line message the command line prints, never ``SystemExit``."""
    import contextlib
    import io

    parser = build_parser()
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(said):
            args = parser.parse_args(["run", *tokens])
    except SystemExit:
        text = said.getvalue().strip().splitlines()
        raise UsageError(text[-1].removeprefix("error: ") if text else "bad options") from None
    args.script = list(script)
    return run_options(args)
