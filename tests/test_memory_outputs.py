"""Memory everywhere the time split is (issue 26, item 6): the report's chart of resident memory
over the steps, TensorBoard's ``memory/*`` scalars (also re-rendered by ``profiler report``),
``compare``'s memory per step of A and B, and the memory line of the notebook magic and the Keras
callback.

The script's trace is built by hand: 1,000 steps of 1 ms, a warm-up of 10, the timed window
(steps 10-309) and the framework window (400-499); resident memory sampled every 5 steps,
growing 2,048 bytes a step with a +-24 KB sawtooth, and 5 samples before the first step.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from profiler.analysis import compare
from profiler.capture.script.spec import ScriptSpec
from profiler.model import PhaseRecord, Segment, Window, WorkDecl, WorkloadTrace
from profiler.processes.launch import WorkloadOutcome
from profiler.reports import charts, focus_view, html, summary, tensorboard, text, viewmodel
from tests.recorded import ENVIRONMENT

STEP_NS = 1_000_000
STEPS = 1_000
GROWTH = 2_048
EVIL = "</script><img src=x onerror=alert(1)>"
RUN_ID = "20260101-000000"
#: Steps done at each memory sample: five before the first step, then every 5th step.
SAMPLED = [0] * 5 + list(range(1, STEPS + 1, 5))


def _rss(step: int, i: int) -> int:
    if step == 0:
        return 90_000_000 + 1_000 * i
    return 100_000_000 + GROWTH * step + ((step * 7919) % 13 - 6) * 4_096


def _record() -> dict:
    rss = [_rss(s, i) for i, s in enumerate(SAMPLED)]
    return {
        "measured": True,
        "interval_s": 0.01,
        "t_ns": [s * STEP_NS for s in SAMPLED],
        "rss_bytes": rss,
        "steps": list(SAMPLED),
        "peak_bytes": max(rss),
        "peak_step": SAMPLED[rss.index(max(rss))],
        "causes": None,
    }


def _script(memory: dict | None) -> dict:
    """A script record as the schema wants it, with this ``memory``."""
    return {
        "path": "/work/x/train.py",
        "argv": [],
        "cwd": "/work/x",
        "graph_mode": False,
        "max_steps": None,
        "marks": {},
        "detection": {
            "steps_detected": True,
            "source": "markers",
            "framework": "numpy",
            "detectors": {},
            "patched": [],
            "cost_ns": 0,
        },
        "steps": STEPS,
        "ended": "completed",
        "exit_code": 0,
        "message": f"the script ran to its end: {STEPS} steps",
        "wall_s": 1.0,
        "stdin_read": False,
        "plan": {},
        "notes": [],
        "memory": memory,
    }


def _seg(first: int, n: int) -> Segment:
    return Segment(first, tuple((first + i) * STEP_NS for i in range(n + 1)))


def _trace(memory: dict | None) -> WorkloadTrace:
    return WorkloadTrace(
        workload="train.py",
        params={},
        work=WorkDecl(1, 1, 1, 0, 0),
        build_ns=0,
        warmup=Window("warmup", (_seg(0, 10),)),
        phases=(
            PhaseRecord("timed", "ok", Window("timed", (_seg(10, 300),))),
            PhaseRecord("framework", "ok", Window("framework", (_seg(400, 100),))),
        ),
        script=_script(memory),
    )


def _outcome(trace: WorkloadTrace) -> WorkloadOutcome:
    return WorkloadOutcome(ScriptSpec.for_worker("train.py"), "train.py", "ok", trace)


def _summary(trace: WorkloadTrace) -> dict:
    from profiler.analysis.run import analyse

    info = summary.RunInfo(run_id=RUN_ID, phases=["timed", "framework"])
    return summary.build(info, analyse([_outcome(trace)]), ENVIRONMENT)


@pytest.fixture(scope="module")
def doc() -> dict:
    return _summary(_trace(_record()))


def test_the_summary_figures_the_outputs_show(doc) -> None:
    m = doc["workloads"][0]["memory"]
    assert m["growth_bytes_per_step"] == pytest.approx(GROWTH, rel=0.01)
    low, high = m["growth_interval"]
    assert low < GROWTH < high and m["grows"]


# --- the report ---------------------------------------------------------------------------


def _memory_chart(vm: dict) -> dict:
    (card,) = vm["focus"]
    (chart,) = [c for c in vm["charts"] if c["id"] == card["memory_chart_id"]]
    return chart


def test_the_report_charts_resident_memory_by_step_bucket_with_the_phase_windows(doc) -> None:
    vm = viewmodel.build(doc)
    chart = _memory_chart(vm)
    traces = {t["name"]: t for t in chart["data"]}
    # One point per bucket of steps: 997 steps (0..996) in buckets 3 steps wide (at most 400),
    # each the largest sample in it, at the bucket's last sampled step.
    width = -(-(max(SAMPLED) + 1) // charts.MEMORY_POINTS)
    assert width == 3
    buckets: dict[int, list[tuple[int, int]]] = {}
    for i, s in enumerate(SAMPLED):
        buckets.setdefault(s // width, []).append((s, _rss(s, i)))
    resident = traces["resident MB (largest in each bucket of steps)"]
    assert len(resident["x"]) == len(buckets) == 200
    assert resident["x"] == [max(s for s, _ in b) for _, b in sorted(buckets.items())]
    assert resident["y"] == [
        round(max(r for _, r in b) / 2**20, 3) for _, b in sorted(buckets.items())
    ]
    # The phases' windows, shaded from their first step to one past their last.
    assert traces["warmup window"]["x"] == [0, 0, 10, 10, 0]
    assert traces["timed window"]["x"] == [10, 10, 310, 310, 10]
    assert traces["framework window"]["x"] == [400, 400, 500, 500, 400]
    assert traces["timed window"]["text"] == "timed: steps 10–309"
    # The growth line: from the warm-up's end to the last step, named with figure and interval.
    m = doc["workloads"][0]["memory"]
    (fit,) = [t for t in chart["data"] if t["name"].startswith("grows by")]
    assert fit["name"] == focus_view.growth_text(m)
    assert re.fullmatch(
        r"grows by 2\.0 KB a step after the warm-up \(95%: 1\.\d KB to 2\.\d KB\)", fit["name"]
    )
    assert fit["x"] == [m["last_step"] - m["steps"], m["last_step"]] == [99, 996]
    assert fit["y"][1] == m["projected_mb"]
    assert fit["y"][1] - fit["y"][0] == pytest.approx(
        m["growth_bytes_per_step"] * 897 / 2**20, abs=1e-3
    )


def test_the_page_holds_the_chart_and_escapes_every_string(doc) -> None:
    evil = copy.deepcopy(doc)
    evil["workloads"][0]["label"] = EVIL
    vm = viewmodel.build(evil)
    page = html.render(vm, library=None)
    assert '<div class="chart memory-chart" id="chart-memory-0"></div>' in page
    assert "<img src=x" not in page
    island = re.search(r'<script id="view-model" type="application/json">(.*?)</script>', page)
    assert island is not None
    assert json.loads(island.group(1))["charts"][-1]["title"].startswith(EVIL)
    line = vm["focus"][0]["memory"]
    assert line.startswith("Memory: 95 MB resident at the first step, 97 MB at the last")
    assert f'<p class="memory">{line}</p>' in page


@pytest.mark.parametrize(
    ("memory", "said"),
    [
        (
            {"measured": False, "why": "the resident size could not be read"},
            "Memory: not measured (the resident size could not be read).",
        ),
        (None, "Memory: not measured (no resident-memory samples in this run)."),
    ],
)
def test_without_a_memory_record_the_report_says_not_measured_and_draws_no_chart(
    memory, said
) -> None:
    doc = _summary(_trace(memory))
    assert "memory" not in doc["workloads"][0]
    vm = viewmodel.build(doc)
    (card,) = vm["focus"]
    assert card["memory"] == said and "memory_chart_id" not in card
    assert not [c for c in vm["charts"] if c["id"].startswith("chart-memory")]
    page = html.render(vm, library=None)
    assert f'<p class="memory">{said}</p>' in page and "memory-chart" not in page
    assert said in text.answer(vm)


def test_growth_too_thin_to_fit_is_said_not_measured() -> None:
    m = {"first_mb": 1.0, "last_mb": 2.0, "peak_mb": 2.0, "peak_step": 9, "steps": 0}
    line = focus_view.memory_line({"memory": {**m, "growth_bytes_per_step": None}})
    assert line.endswith(f"; {focus_view.GROWTH_NOT_MEASURED}.")
    assert focus_view.memory_line({"name": "tf1_gd"}) == ""  # not a script: nothing to say


def test_a_peak_a_phase_held_is_said_to_be_its_and_the_largest_outside_is_given() -> None:
    from profiler.analysis import memory

    # The text generation tutorial: 800 MB before the framework phase's window (steps 29-37),
    # 2,094 MB at its stop, 812 MB after it; 906 MB the script alone, without the profiler.
    mb = 2**20
    steps = [3, 15, 29, 31, 35, 37, 39, 60, 78]
    rss = [778, 759, 800, 1075, 1793, 2140, 812, 865, 870]
    spans = [("framework", 29, 37), ("hooks", 37, 51), ("whatif", 59, 75)]
    got = memory._own_peak(steps, [r * mb for r in rss], 37, spans)
    assert got == ("framework", 870 * mb, 78)
    # A peak about the script's own (under 10% and 50 MB above the rest): not the phase's.
    low = [778, 759, 800, 820, 850, 880, 812, 865, 870]
    assert memory._own_peak(steps, [r * mb for r in low], 37, spans) == (
        "",
        None,
        None,
    )
    assert memory._own_peak(steps, [r * mb for r in rss], 78, spans)[0] == ""
    m = {"first_mb": 766.0, "last_mb": 1413.0, "peak_mb": 2140.0, "peak_step": 37, "steps": 0}
    m.update(peak_phase="framework", own_peak_mb=870.0, own_peak_step=78)
    line = focus_view.memory_line({"memory": {**m, "growth_bytes_per_step": None}})
    assert line.startswith(
        "Memory: 766 MB resident at the first step, 1,413 MB at the last (peak 2,140 MB, 37 "
        "steps in, while the framework phase instrumented the loop: its own memory; outside "
        "the phases' windows 870 MB at most, 78 steps in)"
    )


def test_growth_measured_in_the_early_steps_only_with_no_cause_is_not_called_growth() -> None:
    # A Keras fit beside a busy process: "grows by 597.1 KB a step", its clean steps all in
    # the first half after the warm-up, no cause seen, no finding; quiet: "no growth".
    m = {"first_mb": 596.0, "last_mb": 676.0, "peak_mb": 913.0, "peak_step": 71, "steps": 216}
    m.update(growth_bytes_per_step=611_430.0, growth_interval=[60_109.0, 1_740_800.0])
    m.update(grows=True, late=False, causes=[])
    line = focus_view.memory_line({"memory": m})
    assert "grows by" not in line
    assert line.endswith(
        "; it rose by 597.1 KB a step after the warm-up (95%: 58.7 KB to 1.7 MB) in the early "
        "steps only: no steps later in the run were free of the phases to tell growth from an "
        "allocator filling up, which rises early and levels off."
    )
    assert focus_view.growth_text(m).startswith("rose by 597.1 KB a step in the early steps only")
    # A tf.data pipeline caching in memory (a fit's 12,000 mapped images: 565 MB at the first
    # step, 1,025 MB after its first epoch, then flat): the cache is named as the other cause.
    cached = {"pipelines": [{"stages": [{"kind": "map"}, {"kind": "cache", "detail": "memory"}]}]}
    assert focus_view.memory_line({"memory": m, "script": cached}).endswith(
        "which rises early and levels off, or from the in-memory `.cache()` of the script's "
        "tf.data pipeline, which fills during the first pass over its data and then stays that "
        "size."
    )
    on_disk = {"pipelines": [{"stages": [{"kind": "cache", "detail": "file"}]}]}
    assert focus_view.memory_line({"memory": m, "script": on_disk}) == line
    # Measured late too, or with its cause: growth.
    assert "; it grows by 597.1 KB a step" in focus_view.memory_line(
        {"memory": {**m, "late": True}}
    )
    caused = {**m, "causes": [{"kind": "container", "label": "history", "per_step": 1.0}]}
    assert "; it grows by" in focus_view.memory_line({"memory": caused})
    # A summary before "late" was recorded (schema 9) reads as it did.
    old = {k: v for k, v in m.items() if k != "late"}
    assert "; it grows by" in focus_view.memory_line({"memory": old})


@pytest.mark.browser
@pytest.mark.slow
def test_the_memory_chart_renders_in_chromium_without_console_errors(doc, tmp_path) -> None:
    import shutil

    from playwright.sync_api import sync_playwright

    from profiler.bench import CHROMIUM_ARGS

    vm = viewmodel.build(doc)
    points = len(next(t for t in _memory_chart(vm)["data"] if t["mode"] == "lines+markers")["x"])
    report = tmp_path / "report.html"
    report.write_text(html.render(vm))
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=shutil.which("chromium") or "/usr/bin/chromium",
            args=list(CHROMIUM_ARGS),
        )
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(report.as_uri())
        page.wait_for_function(
            "document.body.getAttribute('data-charts-rendered') !== null", timeout=60_000
        )
        rendered = int(page.evaluate("document.body.getAttribute('data-charts-rendered')"))
        traces = page.locator("#chart-memory-0 .scatterlayer .trace").count()
        drawn = page.locator("#chart-memory-0 .scatterlayer .trace .points .point").count()
        legend = page.locator("#chart-memory-0 .legend").text_content() or ""
        browser.close()
    assert errors == []
    assert rendered == len(vm["charts"])
    assert traces == 5  # three windows, the resident memory, the growth line
    assert drawn == points
    assert "timed window" in legend and "grows by 2.0 KB a step" in legend


# --- TensorBoard --------------------------------------------------------------------------


def _memory_scalars(path: Path) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list[tuple[int, float]]] = {}
    for s in tensorboard.read(path):
        if s["tag"].startswith("memory/"):
            out.setdefault(s["tag"], []).append((s["step"], s["value"]))
    return out


def _check_tensorboard(got: dict[str, list[tuple[int, float]]], m: dict) -> None:
    # One point per step sampled (under 2,000: no bucket holds two), each the median of that
    # step's samples: the five before the first step are step 0.
    resident = got[tensorboard.MEMORY_RESIDENT]
    assert [s for s, _ in resident] == sorted(set(SAMPLED))
    assert resident[0][1] == pytest.approx(90_002_000 / 2**20)
    assert resident[1:] == [
        (s, pytest.approx(_rss(s, 0) / 2**20)) for s in sorted(set(SAMPLED))[1:]
    ]
    # The growth once, at the last step, and its interval: the summary's figures, in KB.
    low, high = m["growth_interval"]
    assert got[tensorboard.MEMORY_GROWTH] == [
        (m["last_step"], pytest.approx(m["growth_bytes_per_step"] / 1024, abs=1e-4))
    ]
    assert got[tensorboard.MEMORY_GROWTH_LOW] == [
        (m["last_step"], pytest.approx(low / 1024, abs=1e-4))
    ]
    assert got[tensorboard.MEMORY_GROWTH_HIGH] == [
        (m["last_step"], pytest.approx(high / 1024, abs=1e-4))
    ]


def test_tensorboard_has_resident_memory_by_step_and_the_growth_once(doc, tmp_path) -> None:
    got = _memory_scalars(tensorboard.write(tmp_path, _trace(_record()), now=1_000.0))
    _check_tensorboard(got, doc["workloads"][0]["memory"])
    # Memory not measured: no memory scalar at all (unmeasured is not zero).
    none = tensorboard.write(tmp_path / "none", _trace({"measured": False, "why": "x"}), now=1.0)
    assert _memory_scalars(none) == {}


def test_profiler_report_writes_the_memory_scalars_again(doc, tmp_path) -> None:
    from profiler.processes import pipeline

    run = tmp_path / RUN_ID
    (run / "workloads" / "train.py").mkdir(parents=True)
    summary.validate(doc)
    (run / "summary.json").write_text(summary.dumps(doc))
    _trace(_record()).save(run / "workloads" / "train.py" / "model.json.gz")
    pipeline.rerender(run)
    (events,) = (run / "tensorboard" / "train.py").glob("events.out.tfevents.*")
    _check_tensorboard(_memory_scalars(events), doc["workloads"][0]["memory"])


# --- compare ------------------------------------------------------------------------------


def _side(doc: dict, name: str, memory: dict | None) -> dict:
    w = copy.deepcopy(doc["workloads"][0])
    w.update(name=name, label=name, slug=name)
    if memory is None:
        w.pop("memory", None)
    else:
        w["memory"] = {**w["memory"], **memory}
    return w


def _run(root: Path, run_id: str, doc: dict, *workloads: dict) -> Path:
    d = root / run_id
    d.mkdir()
    one = copy.deepcopy(doc)
    one["run"]["id"] = run_id
    one["workloads"] = list(workloads)
    (d / "summary.json").write_text(summary.dumps(one))
    return d


def test_compare_sets_both_growths_with_intervals_and_says_not_measured(doc, tmp_path) -> None:
    grows = {"growth_bytes_per_step": 2048.0, "growth_interval": [1979.7, 2088.2], "grows": True}
    flat = {
        "growth_bytes_per_step": 12.0,
        "growth_interval": [-30.0, 50.0],
        "grows": False,
        "last_mb": 300.4,
        "peak_mb": 310.2,
    }
    a = _run(tmp_path, "20260101-000001", doc, _side(doc, "train", grows))
    b = _run(tmp_path, "20260101-000002", doc, _side(doc, "train", flat))
    c = _run(tmp_path, "20260101-000003", doc, _side(doc, "train", None))
    (cmp,) = compare.compare(str(a), str(b), tmp_path)["comparisons"]
    mem = cmp["memory"]
    assert mem["a"]["growth_bytes_per_step"] == 2048.0 and mem["b"]["last_mb"] == 300.4
    assert mem["growth_difference_bytes_per_step"] == 2036.0
    assert mem["growth_difference_interval"] == [1929.7, 2118.2]
    assert mem["sentence"] == (
        "Memory per step: A (train) grows by 2.0 KB a step (95%: 1.9 KB to 2.0 KB), 97 MB "
        "resident at its last step (peak 97 MB); B (train) no growth per step measured (95%: "
        "-30 bytes to 50 bytes), 300 MB resident at its last step (peak 310 MB); A grows 2.0 KB "
        "a step more than B (95%: 1.9 KB to 2.1 KB)."
    )
    printed = text.comparison({"comparisons": [cmp]})
    assert f"  {mem['sentence']}" in printed.splitlines()
    json.dumps(mem, allow_nan=False)
    # One side without memory: not measured there, no difference.
    (cmp,) = compare.compare(str(a), str(c), tmp_path)["comparisons"]
    assert cmp["memory"]["b"] is None and cmp["memory"]["growth_difference_interval"] is None
    assert cmp["memory"]["sentence"].endswith("; B (train): not measured.")
    (cmp,) = compare.compare(str(c), str(c), tmp_path)["comparisons"]
    assert cmp["memory"]["sentence"] == "Memory per step: not measured on either side."


def test_two_growths_within_each_others_interval_do_not_differ(doc) -> None:
    a = _side(doc, "a", {"growth_bytes_per_step": 10.0, "growth_interval": [-5.0, 20.0]})
    b = _side(doc, "b", {"growth_bytes_per_step": 0.0, "growth_interval": [-8.0, 9.0]})
    mem = compare.memory(a, b)
    assert mem["growth_difference_interval"] == [-14.0, 28.0]
    assert mem["sentence"].endswith(
        "; the growths per step do not differ measurably (A − B 95%: -14 bytes to 28 bytes)."
    )


# --- the notebook magic and the Keras callback ----------------------------------------------


def test_the_in_process_summary_prints_the_terminals_memory_line(doc) -> None:
    from profiler import live

    entry = doc["workloads"][0]
    result = SimpleNamespace(
        status="ok",
        analysis=SimpleNamespace(workloads=[SimpleNamespace(attribution=None)]),
        summary={"workloads": [entry], "diagnoses": []},
    )
    s = live.summarise(result)
    assert s.memory == focus_view.memory_line(entry) == viewmodel.build(doc)["focus"][0]["memory"]
    assert str(s).splitlines()[-1] == s.memory


@pytest.mark.slow
def test_the_notebook_magic_prints_the_memory_line(tmp_path, capsys) -> None:
    from profiler import ipython

    cell = "import numpy as np\nw = np.zeros(10)\nfor i in range(2000):\n    w -= 0.01 * (w - 1)\n"
    ipython.profile_loop(f"--phases timed --out {tmp_path}", cell, None)
    out = capsys.readouterr().out
    (run,) = [p for p in tmp_path.iterdir() if p.name[0].isdigit()]
    entry = json.loads((run / "summary.json").read_text())["workloads"][0]
    line = focus_view.memory_line(entry)
    assert line.startswith("Memory: ") and line in out.splitlines()


@pytest.mark.tf
@pytest.mark.slow
def test_the_keras_callbacks_summary_has_the_memory_line(tmp_path) -> None:
    import keras
    import numpy as np

    from profiler.keras import ProfileCallback

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    cb = ProfileCallback(out=tmp_path, phases=("timed",))
    x = np.random.default_rng(0).normal(size=(256, 4)).astype("float32")
    model.fit(x, x[:, :1], epochs=2, batch_size=8, verbose=0, callbacks=[cb])
    assert cb.summary is not None and cb.report_path is not None
    entry = json.loads((cb.run_dir / "summary.json").read_text())["workloads"][0]
    line = focus_view.memory_line(entry)
    assert line.startswith("Memory: ") and str(cb.summary).splitlines()[-1] == line
