"""What held the peak (issue 26, item 4): the census of the script's names nearest the peak of
resident memory, what the names account for, the runtime and the rest.

Truths, known by construction: the script's global ``big`` is 25,000,000 float64 (200,000,000
bytes of data); its list ``kept`` gets one 12,500-float64 array (100,000 bytes) a step; the
quiet script's names hold a few KB.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from profiler.analysis import memory
from profiler.capture import memory_peak
from profiler.capture.memory import RssSampler, read_spill
from profiler.model.memory import Census, Censuses
from profiler.reports import viewmodel
from tests.test_script_run import cli, only_run, workload, write

BIG = """
import numpy as np

big = np.ones(25_000_000)  # 200,000,000 bytes
kept = []
w = np.zeros(100)
for step in range(3000):
    g = np.random.default_rng(step).normal(size=(20, 100)).mean(axis=0)
    w -= 0.01 * g
    kept.append(np.ones(12_500))  # 100,000 bytes a step
print(len(kept))
"""

QUIET = """
import numpy as np

w = np.zeros(100)
# 10,000 steps: the loop watcher's first 0.25 s are not steps yet (tests/test_memory.py).
for step in range(10_000):
    g = np.random.default_rng(step).normal(size=(20, 100)).mean(axis=0)
    w -= 0.01 * g
print(float(w[0]))
"""


def _run(tmp_path: Path, body: str) -> tuple[dict, str]:
    script = write(tmp_path, "loop.py", body)
    out = cli(tmp_path, "--repeat", "0", "--phases", "timed", "--no-progress", str(script))
    assert out.returncode == 0, out.stderr[-2000:]
    return workload(only_run(tmp_path)), out.stdout


# --- the script under the profiler --------------------------------------------------------------


def test_the_peak_names_the_global_array_and_the_growing_list(tmp_path: Path) -> None:
    w, stdout = _run(tmp_path, BIG)
    p = w["memory"]["peak"]
    assert p is not None, w["memory"]
    by_name = {h["name"]: h for h in p["holders"]}
    big = by_name["big"]
    assert big["kind"] == "array" and big["what"] == "numpy float64 (25000000,)"
    assert abs(big["bytes"] - 200_000_000) <= 0.05 * 200_000_000, big
    kept = by_name["kept"]
    assert kept["kind"] == "container" and kept["item"] == "numpy float64 (12500,)"
    # 100,000 bytes an item (plus the list's pointers), within 5%.
    assert abs(kept["bytes"] / kept["count"] - 100_000) <= 5_000, kept
    # The census nearest the peak: its resident bytes within 5% (and 8 MB) of the peak's,
    # unless the last rise came within 0.5 s of the run's end (then the census at the end).
    assert p["rss_mb"] >= min(w["memory"]["peak_mb"] * 0.95, w["memory"]["peak_mb"] - 8)
    # What the names hold is in the resident bytes: the arrays are written (ones), not lazy.
    assert p["held_mb"] <= p["rss_mb"]
    assert p["held_mb"] == pytest.approx(sum(h["mb"] for h in p["holders"]), abs=0.1)
    assert p["runtime_mb"] is not None and p["runtime_mb"] > 0
    assert p["censuses"] >= 2 and p["cost_us"] is not None
    assert "global `big`: numpy float64 (25000000,), 190.7 MB" in stdout
    assert "global `kept`: list of" in stdout
    # The report says it too, under the memory paragraph (escaped like every string).
    page = (only_run(tmp_path) / "report.html").read_text()
    assert '<p class="memory-peak">What held the peak' in page
    assert "global `big`: numpy float64 (25000000,), 190.7 MB" in page


def test_a_script_without_large_holders_says_the_rest_is_the_runtime(tmp_path: Path) -> None:
    w, stdout = _run(tmp_path, QUIET)
    p = w["memory"]["peak"]
    assert p is not None, w["memory"]
    # The names hold a few KB: the resident bytes are the runtime (resident before the first
    # step) and little else.
    assert p["held_mb"] < 1
    assert p["runtime_mb"] is not None
    assert p["runtime_mb"] >= 0.8 * p["rss_mb"], p
    assert abs(p["rest_mb"]) <= 0.2 * p["rss_mb"], p
    assert "the runtime (resident before the first step" in stdout


# --- the census, on objects built here ----------------------------------------------------------


@pytest.fixture
def main(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A ``__main__`` module of the test's own, whose globals the census reads."""
    m = types.ModuleType("__main__")
    m.__file__ = "/nowhere/script.py"
    monkeypatch.setitem(sys.modules, "__main__", m)
    return m


def test_the_census_counts_each_buffer_once_under_its_first_name(main: types.ModuleType) -> None:
    main.x_train = np.zeros((600, 784))  # 3,763,200 bytes
    main.view = main.x_train[::2]  # the same buffer: counted once
    main.batches = [(np.ones(1000), np.ones(1000, dtype=np.int32)) for _ in range(20)]

    class Trainer:
        pass

    main.trainer = Trainer()
    main.trainer.cache = {i: np.ones(500) for i in range(10)}  # one attribute deep
    main.losses = [0.5, 0.4]  # no arrays: no holder
    c = memory_peak.census(0, 3, 10**9)
    by_name = {h.name: h for h in c.holders}
    assert set(by_name) == {"x_train", "batches", "trainer.cache"}
    assert by_name["x_train"].bytes == 600 * 784 * 8
    assert by_name["x_train"].what == "numpy float64 (600, 784)"
    b = by_name["batches"]
    assert b.count == 20 and b.looked == 20 and not b.capped
    assert b.item == "tuple of numpy float64 (1000,), numpy int32 (1000,)"
    assert b.bytes == 20 * 12_000 + sys.getsizeof(main.batches)
    assert by_name["trainer.cache"].bytes == 10 * 4000 + sys.getsizeof(main.trainer.cache)
    assert c.holders[0].name == "x_train"  # largest first
    assert c.held_bytes == sum(h.bytes for h in c.holders)
    assert c.step == 3 and c.rss_bytes == 10**9 and c.cost_ns > 0 and c.errors == 0


def test_a_container_of_unlike_items_is_named_by_its_largest(main: types.ModuleType) -> None:
    # A TF1 Saver's var_list read "list of 27 tf.Variable int32_ref ()" after its first item,
    # the global step, beside (3136, 1024) weights.
    main.var_list = [np.int32(0), np.ones((64, 32)), np.ones(10)]
    (h,) = memory_peak.census(0, 0, 0).holders
    assert h.item == "items, the largest numpy float64 (64, 32)"
    main.var_list = [np.ones(10), np.ones(10)]
    (h,) = memory_peak.census(0, 0, 0).holders
    assert h.item == "numpy float64 (10,)"


def test_a_long_container_is_looked_at_in_part_and_says_so(main: types.ModuleType) -> None:
    n = 3 * memory_peak.MAX_ITEMS
    main.history = [np.ones(10) for _ in range(n)]
    (h,) = memory_peak.census(0, 0, 0).holders
    assert h.count == n and h.looked == memory_peak.MAX_ITEMS and h.capped
    assert h.bytes == pytest.approx(n * 80 + sys.getsizeof(main.history), rel=0.01)


def test_a_long_list_of_views_of_one_array_counts_the_array_once(main: types.ModuleType) -> None:
    # Nielsen's loader: 25,000 (x, y) pairs whose x are views of one array. Scaling the
    # looked-at sum by the length counted the array 2.5 times (451 MB "held" in 223 MB).
    n = 25_000
    images = np.zeros((n, 784), dtype=np.float32)  # 78,400,000 bytes
    main.training_data = [(images[i], np.float32(i % 10)) for i in range(n)]
    (h,) = memory_peak.census(0, 0, 0).holders
    assert h.count == n and h.looked < n
    assert images.nbytes <= h.bytes <= 1.1 * images.nbytes + sys.getsizeof(main.training_data)


def test_a_function_s_locals_are_names_too() -> None:
    batches = [np.ones(2000) for _ in range(3)]  # read by the census
    c = memory_peak.census(0, 0, 0, script=__file__)
    h = next(h for h in c.holders if h.name.endswith("().batches"))
    assert h.name == "test_a_function_s_locals_are_names_too().batches"
    assert h.bytes == 3 * 16_000 + sys.getsizeof(batches)


def test_a_keras_model_counts_its_weights_and_its_optimizer_apart(main: types.ModuleType) -> None:
    tf = pytest.importorskip("tensorflow")
    keras = pytest.importorskip("keras")
    model = keras.Sequential([keras.Input((100,)), keras.layers.Dense(50), keras.layers.Dense(10)])
    model.compile(optimizer=keras.optimizers.Adam(), loss="mse")
    model.optimizer.build(model.trainable_variables)
    main.model = model
    main.w0 = model.weights[0]  # the model's own: counted under `model` only
    main.losses = [tf.constant(1.0) for _ in range(30)]
    c = memory_peak.census(0, 0, 0)
    by_name = {h.name: h for h in c.holders}
    params = 100 * 50 + 50 + 50 * 10 + 10
    m = by_name["model"]
    assert m.kind == "model" and m.count == params and m.bytes == 4 * params
    # Adam: two slots a weight, and its step count and learning rate.
    assert m.optimizer_bytes is not None and 8 * params <= m.optimizer_bytes <= 8 * params + 64
    assert "w0" not in by_name
    losses = by_name["losses"]
    assert losses.item == "tf.Tensor float32 ()" and losses.count == 30
    assert c.held_bytes == m.bytes + m.optimizer_bytes + losses.bytes
    text = viewmodel._holder_text(memory.peak_json(_peak(c))["holders"][0])  # type: ignore[index]
    assert text.startswith("global `model`: Sequential, 5,560 parameters in weights, 21.7 KB;")
    assert "optimizer slots 43." in text


def test_a_model_s_weights_count_under_the_model_not_a_layer_named_before_it(
    main: types.ModuleType,
) -> None:
    # The mixed precision guide names its layers before the model: the model read "20.0 M
    # parameters in weights, 160.0 KB", its 64 MB under the layer's name.
    pytest.importorskip("tensorflow")
    keras = pytest.importorskip("keras")
    inputs = keras.Input((100,))
    dense1 = keras.layers.Dense(50)
    dense2 = keras.layers.Dense(10)
    main.dense1, main.dense2 = dense1, dense2
    main.model = keras.Model(inputs, dense2(dense1(inputs)))
    by_name = {h.name: h for h in memory_peak.census(0, 0, 0).holders}
    assert by_name["model"].bytes == 4 * (100 * 50 + 50 + 50 * 10 + 10)
    assert "dense1" not in by_name and "dense2" not in by_name


def _peak(c: Census) -> memory.Peak:
    got = memory.peak_of({"census": Censuses(c, c, c.rss_bytes, 1, 1, 1).to_json()})
    assert got is not None
    return got


# --- when the census is taken -------------------------------------------------------------------


def _fake(t_ns: int, step: int, rss: int, script: str | None = None) -> Census:
    return Census(t_ns, step, rss, held_bytes=rss // 2, holders=(), found=0, names=0, cost_ns=7)


def test_a_census_is_taken_on_a_new_high_of_5_percent_and_8_mb_at_most_every_half_second() -> None:
    mb = 2**20
    watch = memory_peak.PeakWatch(take=_fake)
    assert watch.sample(0, 100 * mb, 0, now=0.0)  # the first: above nothing
    assert not watch.sample(1, 200 * mb, 0, now=0.2)  # within 0.5 s of the last
    assert watch.sample(2, 200 * mb, 0, now=0.6)
    assert not watch.sample(3, 209 * mb, 0, now=1.2)  # 4.5%: not a new high
    assert watch.sample(4, 211 * mb, 5, now=1.3)  # the first step: a census at once
    assert watch.start is not None and watch.start.step == 5
    assert watch.peak is not None and watch.peak.t_ns == 4  # the highest yet
    big = memory_peak.PeakWatch(take=_fake)
    big.sample(0, 2000 * mb, 0, now=0.0)
    assert not big.sample(1, 2007 * mb, 0, now=1.0)  # 5% of a small process, but < 8 MB ...
    assert not big.sample(1, 2090 * mb, 0, now=2.0)  # ... and 8 MB of a large one, but < 5%
    # At the end, a new high within 0.5 s of the last census still gets one.
    assert watch.final(9, 260 * mb, 40, now=1.4) and watch.peak.t_ns == 9
    rec = Censuses.from_json(watch.record())
    assert rec is not None and rec.taken == 4 and rec.before_steps_bytes == 209 * mb
    assert rec.cost_ns == 7


def test_the_runtime_is_what_was_resident_before_the_first_step_less_the_names() -> None:
    mb = 2**20
    start = _fake(0, 1, 700 * mb)  # the names held 350 MB at the first step
    peak = _fake(1, 90, 1000 * mb)  # ... and 500 MB at the peak
    p = memory.peak_of({"census": Censuses(peak, start, 600 * mb, 2, 7, 7).to_json()})
    assert p is not None
    assert p.runtime_bytes == 250 * mb
    assert p.held_bytes == 500 * mb and p.rest_bytes == 250 * mb
    no_start = memory.peak_of({"census": Censuses(peak, None, None, 1, 7, 7).to_json()})
    assert no_start is not None and no_start.runtime_bytes is None
    assert no_start.rest_bytes == 500 * mb


def test_a_peak_before_the_first_step_with_no_name_holding_it_takes_the_first_steps_census():
    # A CS231n data loader's float64 copy beside its int64 source: 1,086 MB before the first
    # step, its names not bound yet, read "no array, tensor or model"; at the first step
    # X_train held 516 MB.
    mb = 2**20
    empty = Census(5, 0, 1086 * mb, held_bytes=0, holders=(), found=0, names=3, cost_ns=7)
    start = Census(9, 1, 563 * mb, held_bytes=517 * mb, holders=(), found=4, names=9, cost_ns=7)
    p = memory.peak_of({"census": Censuses(empty, start, 590 * mb, 10, 7, 7).to_json()})
    assert p is not None and p.before_steps_peak and p.step == 1 and p.held_bytes == 517 * mb
    m = {"peak_mb": 1070.0, "peak_step": 0, "peak": memory.peak_json(p)}
    assert (
        "the peak sampled: 1,070 MB at step 0, before the first step, while the script made its "
        "data: no name held it then, its temporaries did"
    ) in viewmodel.peak_lines(m)[0]
    # A census at the peak that found names is kept.
    held = Census(5, 0, 1086 * mb, held_bytes=900 * mb, holders=(), found=1, names=3, cost_ns=7)
    kept = memory.peak_of({"census": Censuses(held, start, 590 * mb, 10, 7, 7).to_json()})
    assert kept is not None and kept.step == 0 and not kept.before_steps_peak


def test_no_census_is_not_measured_never_zero() -> None:
    assert memory.peak_of({"census": None}) is None
    m = {"peak_mb": 512.0, "peak_step": 40, "peak": None}
    (line,) = viewmodel.peak_lines(m)
    assert "not measured" in line and "0 bytes" not in line
    lines = viewmodel.peak_lines({**m, "peak": memory.peak_json(_peak(_fake(0, 1, 2**30)))})
    assert "runtime" in lines[1]
    start_less = memory.peak_of(
        {"census": Censuses(_fake(0, 1, 2**30), None, None, 1, 7, 7).to_json()}
    )
    text = viewmodel.peak_lines({**m, "peak": memory.peak_json(start_less)})[1]
    assert "the runtime not measured" in text


def test_the_record_so_far_keeps_the_census(tmp_path: Path) -> None:
    sampler = RssSampler(lambda: 0, lambda: 0, spill=tmp_path)
    if not sampler.available:
        pytest.skip("no /proc/self/statm here")
    sampler.census = memory_peak.PeakWatch(take=_fake)
    sampler.start()
    sampler.stop()
    sampler._census_json = None
    sampler.write_spill()
    got = read_spill(tmp_path)
    assert got is not None and got["census"]["taken"] >= 1
    assert json.dumps(sampler.record()["census"])
    sampler.drop_spill()


def test_a_slice_is_described_as_the_view_of_the_array_its_bytes_are() -> None:
    import numpy as np

    from profiler.capture.memory_peak import describe

    full = np.zeros((600, 784), dtype=np.float32)
    assert describe(full[:96], np) == "numpy float32 (96, 784), a view of (600, 784)"
    assert describe(full, np) == "numpy float32 (600, 784)"
    assert describe(full.reshape(-1), np) == "numpy float32 (470400,)"  # all of it: no note


def test_no_census_or_growth_probe_while_a_what_ifs_variant_is_on() -> None:
    # A float32 what-if's blocks hold the script's float64 arrays (and a history list's
    # float64 copies) as float32: a census or probe then read "each a numpy float32 array
    # (512, 64) (128.1 KB a step, 50% of the growth)" for 256 KB float64 copies (100%).
    import time

    on = [True]
    steps = [1]
    sampler = RssSampler(lambda: 0, lambda: steps[0], as_written=lambda: not on[0])
    if not sampler.available:
        pytest.skip("no /proc/self/statm here")
    seen: list[str] = []
    sampler.census = types.SimpleNamespace(
        sample=lambda *a: seen.append("census") or False, final=lambda *a: False
    )
    sampler.causes = types.SimpleNamespace(probe=lambda step: seen.append("probe"))
    sampler.allocator = types.SimpleNamespace(read=lambda *a: None)
    sampler.start()
    try:
        time.sleep(0.2)  # twenty samples with the variant on
        assert seen == []
        on[0] = False
        deadline = time.monotonic() + 5
        while {"census", "probe"} - set(seen) and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        sampler.stop()
    assert {"census", "probe"} <= set(seen), seen


def test_a_census_across_a_variants_switch_is_dropped() -> None:
    """A census walking the names while a what-if's variant is switched on (its float32 block
    rebinding a 1.7 GB data set's arrays) read the variant's arrays as the script's: where the
    script's state changed while it was taken, it is not kept."""
    watch = memory_peak.PeakWatch(take=_fake)
    assert not watch.sample(1, 100 * 2**20, 5, 10.0, still=lambda: False)
    assert watch.dropped == 1 and watch.peak is None and watch.start is None
    assert watch.sample(2, 100 * 2**20, 5, 10.0, still=lambda: True)
    assert watch.peak is not None and watch.peak.step == 5
