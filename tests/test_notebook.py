"""In a notebook: ``%load_ext profiler``, ``%%profile_loop`` over a TensorFlow loop in a cell,
``%profile_run`` over a seed script, and a cell that raises, executed in a real Jupyter kernel
(``nbclient``). Each shows the report inline (a sandboxed iframe holding the page) and the run
folder's path; the run folders hold what was measured."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from tests.conftest import REPO, python_env

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

SEED = REPO / "tests" / "data" / "seed000_tf1.py"

CELLS = [
    "%load_ext profiler",
    """\
import numpy as np
import tensorflow as tf

x = tf.constant(np.random.rand(256, 16), tf.float32)
y = tf.constant(np.random.rand(256, 1), tf.float32)
w = tf.Variable(tf.zeros((16, 1)))

@tf.function
def train_step():
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((x @ w - y) ** 2)
    w.assign_sub(0.05 * tape.gradient(loss, w))
    return loss
""",
    """\
%%profile_loop --max-steps 500 --out {runs}
for epoch in range(100_000):
    loss = train_step()
""",
    "print('kernel state kept:', float(loss) < 1.0)",
    "%profile_run --out {runs} --tf1 --phases timed --max-steps 300 {seed}",
    """\
%%profile_loop --out {runs}
for i in range(100_000):
    train_step()
    if i == 400:
        raise RuntimeError("a bad batch")
""",
    "print('after the error:', float(train_step()) < 1.0)",
]


def _text(output: dict) -> str:
    if output.get("output_type") == "stream":
        return output.get("text", "")
    if output.get("output_type") == "error":
        return f"{output.get('ename')}: {output.get('evalue')}"
    return output.get("data", {}).get("text/plain", "")


def _frames(cell: dict) -> list[str]:
    """The report pages the cell displayed (the iframes' srcdoc, unescaped)."""
    pages = []
    for o in cell["outputs"]:
        page = o.get("data", {}).get("text/html", "")
        for found in re.findall(r'<iframe sandbox="allow-scripts"[^>]*srcdoc="([^"]*)"', page):
            pages.append(html.unescape(found))
    return pages


def _run_folder(cell: dict) -> Path:
    text = "".join(_text(o) for o in cell["outputs"])
    match = re.search(r"run folder: (\S+)", text)
    assert match, text[-2000:]
    return Path(match.group(1))


@pytest.mark.tf
@pytest.mark.slow
def test_the_magics_profile_cells_and_scripts_in_a_real_kernel(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c.format(runs=runs, seed=SEED)) for c in CELLS]
    for key, value in python_env().items():
        monkeypatch.setenv(key, value)
    client = nbclient.NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    load, _define, loop, kept, script, raises, after = nb.cells

    assert not [o for o in load["outputs"] if o["output_type"] == "error"]

    # %%profile_loop: the cell ran in the kernel's namespace, its tf.function calls the steps.
    # --max-steps ended the cell's loop there (as it ends a script); the kernel kept its state.
    assert "kernel state kept: True" in "".join(_text(o) for o in kept["outputs"])
    assert "µs per step" in "".join(_text(o) for o in loop["outputs"])
    (page,) = _frames(loop)
    assert "<html" in page.lower() and "compute" in page and "dispatch" in page
    doc = json.loads((_run_folder(loop) / "summary.json").read_text())
    (w,) = doc["workloads"]
    assert doc["run"]["status"] == "ok"
    assert w["script"]["steps"] == 500 and w["script"]["detection"]["framework"] == "tf2"
    assert {p["name"]: p["status"] for p in w["phases"]}["framework"] == "ok"

    # %profile_run: the command line's run of the seed script, its report shown.
    (page,) = _frames(script)
    assert "seed000_tf1.py" in page
    doc = json.loads((_run_folder(script) / "summary.json").read_text())
    assert doc["run"]["status"] == "ok"
    assert doc["workloads"][0]["script"]["detection"]["framework"] == "tf1"

    # A cell that raises: what was measured is shown, then the error.
    errors = [o for o in raises["outputs"] if o["output_type"] == "error"]
    assert [e["ename"] for e in errors] == ["RuntimeError"]
    (page,) = _frames(raises)
    doc = json.loads((_run_folder(raises) / "summary.json").read_text())
    assert doc["run"]["status"] == "failed"
    # The first call held back while the loop was watched is a step all the same.
    record = doc["workloads"][0]["script"]
    assert record["steps"] + ((record["auto_step"] or {}).get("held_calls") or 0) == 401
    assert "the cell raised RuntimeError after 401 steps" in doc["workloads"][0]["error"]
    # The kernel goes on, its TensorFlow unpatched and working.
    assert "after the error: True" in "".join(_text(o) for o in after["outputs"])
