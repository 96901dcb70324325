"""The truth of a memory corpus script, measured without the profiler: resident memory at
every step and the growth per step after the warm-up.

    python tests/data/memory/truth.py SCRIPT.py [--fix 'OLD' 'NEW' ...]

The script runs as ``__main__``; its steps are the iterations of the line marked ``# step``
(counted with a line tracer on the script's own frames only, which allocates nothing that
stays). Each ``--fix`` replaces the text OLD with NEW in the script first (the fix its docstring
names). Resident bytes come from ``/proc/self/statm``; growth is the least-squares slope of
resident bytes against steps after the first 10% of the steps (at least 10).
"""

import os
import sys
import time

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    with open("/proc/self/statm", "rb") as fh:
        return int(fh.read().split()[1]) * PAGE


def main() -> None:
    path = sys.argv[1]
    src = open(path).read()
    for i, arg in enumerate(sys.argv):
        if arg == "--fix":
            old, new = sys.argv[i + 1], sys.argv[i + 2]
            assert old in src, f"{old!r} is not in {path}"
            src = src.replace(old, new)
    line = next(n for n, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# step"))
    points: list[tuple[int, int]] = []
    fname = os.path.abspath(path)

    def local(frame, event, _arg):  # noqa: ANN001
        if event == "line" and frame.f_lineno == line:
            points.append((len(points), rss()))
        return local

    def tracer(frame, _event, _arg):  # noqa: ANN001
        return local if frame.f_code.co_filename == fname else None

    sys.argv = [path]
    code = compile(src, fname, "exec")
    t = time.perf_counter()
    sys.settrace(tracer)
    try:
        exec(code, {"__name__": "__main__", "__file__": fname})
    finally:
        sys.settrace(None)
    wall = time.perf_counter() - t
    n = len(points)
    start = max(10, n // 10)
    xs = [s for s, _ in points[start:]]
    ys = [r for _, r in points[start:]]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    print(
        f"{n} steps in {wall:.1f} s; resident {points[0][1] / 2**20:.1f} MB at the first "
        f"step, {points[-1][1] / 2**20:.1f} MB at the last; growth after step {start}: "
        f"{slope:,.0f} bytes a step"
    )


if __name__ == "__main__":
    main()
