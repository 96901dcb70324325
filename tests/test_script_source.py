"""A script's source: checks, step marks compiled into its tree, and the command line's split."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from profiler import cli
from profiler.capture.script import source
from profiler.capture.script.source import ScriptError

LOOP = """\
import sys
w = 0.0

def grad(i):
    return i * 0.5

for epoch in range(3):
    for i in range(4):
        g = grad(i)
        w -= 0.1 * g
    print(epoch)
"""


def load(tmp_path: Path, text: str, name: str = "s.py") -> source.Source:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return source.load(path)


def run_marked(src: source.Source) -> list[str]:
    """Execute the marked script with marks that log what they see."""
    log: list[str] = []
    g = {
        source.STEP_LINE: lambda: log.append("line"),
        source.STEP_LINE_END: lambda: log.append("end"),
        source.STEP_FUNCTION: lambda fn: lambda *a, **k: (log.append("call"), fn(*a, **k))[1],
        "print": lambda *a: None,
    }
    exec(src.compile(), g)
    return log


def test_load_rejects_missing_directories_binary_and_syntax_errors(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match="no such script"):
        source.load(tmp_path / "nope.py")
    with pytest.raises(ScriptError, match="is a directory"):
        source.load(tmp_path)
    (tmp_path / "b.py").write_bytes(b"\x00\x01binary")
    with pytest.raises(ScriptError, match="binary data"):
        source.load(tmp_path / "b.py")
    (tmp_path / "c.py").write_text("x = (\n")
    with pytest.raises(ScriptError, match=r"is not a Python script: .*\(line 1\)"):
        source.load(tmp_path / "c.py")
    # Found only when compiling, not when parsing.
    (tmp_path / "d.py").write_text("return 3\n")
    with pytest.raises(ScriptError, match="'return' outside function"):
        source.load(tmp_path / "d.py")
    (tmp_path / "e.py").write_bytes(b"x = '\xff\xfe'\n")
    with pytest.raises(ScriptError, match="is not a Python script"):
        source.load(tmp_path / "e.py")
    # Outside a literal too (a comment), as ``python`` checks; a coding line is honoured.
    (tmp_path / "f.py").write_bytes(b"x = 1  # caf\xe9\n")
    with pytest.raises(ScriptError, match=r"not UTF-8 text .*byte 0xe9 on line 1"):
        source.load(tmp_path / "f.py")
    (tmp_path / "g.py").write_bytes(b"# coding: latin-1\nx = 'caf\xe9'\n")
    assert source.load(tmp_path / "g.py").tree.body[0].value.value == "caf\xe9"  # type: ignore[attr-defined]


def test_step_line_on_a_loop_header_marks_each_iteration_and_the_loop_end(tmp_path: Path) -> None:
    src = load(tmp_path, LOOP)
    what = source.mark_step_line(src, 8)
    assert what == "line 8 (for loop header): each iteration"
    # 3 runs of the inner loop: 4 marks then its end, each time.
    assert run_marked(src) == (["line"] * 4 + ["end"]) * 3


def test_step_line_inside_a_loop_ends_after_the_innermost_loop(tmp_path: Path) -> None:
    src = load(tmp_path, LOOP)
    assert source.mark_step_line(src, 10) == "line 10: each execution"
    assert run_marked(src) == (["line"] * 4 + ["end"]) * 3
    # Line numbers are the file's: the mark sits on the marked line.
    calls = [n for n in ast.walk(src.tree) if isinstance(n, ast.Name) and n.id == source.STEP_LINE]
    assert [c.lineno for c in calls] == [10]


def test_step_line_in_a_function_marks_each_call(tmp_path: Path) -> None:
    src = load(tmp_path, LOOP)
    source.mark_step_line(src, 5)
    assert run_marked(src).count("line") == 12


@pytest.mark.parametrize(
    ("line", "message"),
    [(2, "not inside a loop or a function"), (3, "no statement starts at line 3")],
)
def test_step_line_errors(tmp_path: Path, line: int, message: str) -> None:
    with pytest.raises(ScriptError, match=message):
        source.mark_step_line(load(tmp_path, LOOP), line)


def test_parse_step_line(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    assert source.parse_step_line("12", script) == 12
    assert source.parse_step_line("train.py:12", script) == 12
    assert source.parse_step_line(f"{script}:12", script) == 12
    with pytest.raises(ScriptError, match="only lines of the script itself"):
        source.parse_step_line("other.py:12", script)
    with pytest.raises(ScriptError, match="positive line number"):
        source.parse_step_line("train.py:x", script)


def test_step_function_is_the_outermost_decorator(tmp_path: Path) -> None:
    src = load(
        tmp_path,
        """
        import functools

        class Trainer:
            def step(self, i):
                return i

        @functools.lru_cache(maxsize=None)
        def step(i):
            return i

        for i in range(5):
            step(i % 2)
        t = Trainer()
        t.step(1)
        """,
    )
    # The exact qualified name wins over the method of the same name.
    assert source.mark_step_function(src, "step") == "step"
    # Outermost: every call is seen, even those the cache answers.
    assert run_marked(src) == ["call"] * 5


def test_step_function_by_qualified_name_and_errors(tmp_path: Path) -> None:
    text = """
        class Trainer:
            def step(self):
                pass

        class Other:
            def step(self):
                pass
        """
    with pytest.raises(ScriptError, match=r"defines several \(Trainer\.step, Other\.step\)"):
        source.mark_step_function(load(tmp_path, text), "step")
    assert source.mark_step_function(load(tmp_path, text), "Other.step") == "Other.step"
    with pytest.raises(ScriptError, match=r"defines no function 'fit' \(it defines: Other.step"):
        source.mark_step_function(load(tmp_path, text), "fit")


@pytest.mark.parametrize(
    ("text", "reads"),
    [
        ("import numpy as np\nx = 1\n", False),
        ("import sys\nn = int(sys.argv[1])\n", True),
        ("from sys import argv\n", True),
        ("import argparse\n", True),
        ("import tensorflow.compat.v1 as tf\nFLAGS = tf.app.flags.FLAGS\n", True),
    ],
)
def test_reads_arguments(tmp_path: Path, text: str, reads: bool) -> None:
    assert source.reads_arguments(load(tmp_path, text)) is reads


def test_imports_are_top_level_packages(tmp_path: Path) -> None:
    src = load(tmp_path, "import tensorflow.compat.v1 as tf\nfrom keras import layers\nimport os\n")
    assert src.imports() == {"tensorflow", "keras", "os"}
    assert src.imports() & source.FRAMEWORKS == {"tensorflow", "keras"}


# --- the command line's split at the script ---------------------------------------------------


@pytest.fixture()
def parser():  # type: ignore[no-untyped-def]
    return cli.build_parser()


def test_everything_after_the_script_is_its_own(parser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "train.py"
    script.write_text("import sys\nprint(sys.argv)\n")
    argv = ["run", "--out", "runs", "--max-steps", "9", str(script), "--lr", "3", "--out", "x"]
    ours, theirs, note = cli.split_script(parser, argv)
    assert ours == ["run", "--out", "runs", "--max-steps", "9"]
    assert theirs == [str(script), "--lr", "3", "--out", "x"]
    assert "--out after train.py go to the script" in note


def test_options_after_a_script_that_reads_no_arguments_are_ours(parser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "seed.py"
    script.write_text("print('no arguments here')\n")
    ours, theirs, note = cli.split_script(
        parser, ["run", str(script), "--tf1", "--max-steps", "2000", "--out=/tmp/r"]
    )
    assert ours == ["run", "--tf1", "--max-steps", "2000", "--out=/tmp/r"]
    assert theirs == [str(script)] and "reads no command-line arguments" in note
    # Unknown options stay the script's.
    _ours, theirs, _note = cli.split_script(parser, ["run", str(script), "--tf1", "--lr", "3"])
    assert theirs == [str(script), "--tf1", "--lr", "3"]


def test_option_values_and_workloads_are_not_scripts(parser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    feed = tmp_path / "input.txt"
    feed.write_text("x\n")
    argv = ["run", "numpy_gd", "--stdin", str(feed), "--steps", "3", "my.py", "a"]
    assert cli.split_script(parser, argv) == (argv[:6], ["my.py", "a"], "")
    assert cli.split_script(parser, ["run", "numpy_gd"]) == (["run", "numpy_gd"], [], "")
    assert cli.split_script(parser, ["run", "--", "prog", "-x"]) == (["run"], ["prog", "-x"], "")
    assert cli.split_script(parser, ["list"]) == (["list"], [], "")


def test_the_loop_body_is_the_step_when_it_updates_and_its_first_call_is_not_the_step() -> None:
    # handson-ml's loop calls random_batch (numpy) before its own update: the body is the
    # step. A loop calling train_step(x) has train_step as its step, though its name reads as
    # an update.
    from types import SimpleNamespace

    from profiler.capture.script.source import body_is_step

    assert body_is_step(SimpleNamespace(updates=True, calls=("random_batch", "print_bar")))
    assert body_is_step(SimpleNamespace(updates=True, calls=("grad",)))
    assert not body_is_step(SimpleNamespace(updates=True, calls=("train_step",)))
    assert not body_is_step(SimpleNamespace(updates=False, calls=("random_batch",)))


def test_a_loop_body_recording_the_gradients_is_the_step_whatever_it_calls_after() -> None:
    # d2l's linear regression from scratch (TensorFlow): its loop records the loss on a tape,
    # takes the gradients, then calls sgd(...): told to wrap sgd alone in tf.function (1.95x
    # without the profiler; the whole body 4.8-10.8x).
    from profiler.capture.script.source import body_is_step

    sites = _sites(
        """
        for epoch in range(3):
            for X, y in data_iter(10, features, labels):
                with tf.GradientTape() as g:
                    l = loss(net(X, w, b), y)
                dw, db = g.gradient(l, [w, b])
                sgd([w, b], [dw, db], lr, 10)
            print(epoch)
        """
    )
    inner, outer = sites[3], sites[2]
    assert inner.tape and body_is_step(inner)
    assert not outer.tape
    # A loop calling the script's own step function, which holds the tape, is not.
    sites = _sites(
        """
        def train_step(x):
            with tf.GradientTape() as tape:
                pass
        for x in batches:
            train_step(x)
        """
    )
    assert not sites[5].tape and not body_is_step(sites[5])


def _sites(body: str) -> dict[int, source.LoopSite]:
    text = textwrap.dedent(body)
    src = source.Source(Path("t.py"), ast.parse(text))
    return {s.line: s for s in source.mark_loops(src)}


def test_an_environments_step_is_no_model_update_and_an_inline_gradient_step_is():
    """``env.step(action)`` in an RL episode's time-step loop is the environment's: the
    episode loop, whose body applies the gradients, is the update (Keras's actor-critic had
    its time-step loop taken as the steps). Minibatch SGD's ``w -= lr * X.T @ (X @ w - y)``
    updates ``w`` from itself: its loop updates and carries ``w``; a sum ``g += x @ y`` does
    neither."""
    sites = _sites(
        """
        while True:
            state = env.reset()
            with tf.GradientTape() as tape:
                for t in range(200):
                    probs = model(state)
                    state, reward, done, _ = env.step(action)
                loss = compute()
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
        for i in range(0, n, 64):
            w -= 0.01 * xb.T @ (xb @ w - yb) / len(xb)
        for i in range(n):
            g += x[i] @ y[i]
        """
    )
    episode, steps, sgd, total = sites[2], sites[5], sites[11], sites[13]
    assert episode.updates and not steps.updates and not steps.training
    assert sgd.updates and sgd.carried == ("w",)
    assert not total.updates and total.carried == ()


def test_metrics_made_anew_by_the_loop_around_the_step_are_named_with_that_loops_line() -> None:
    # TF's custom training walkthrough makes its epoch's metrics in the epoch loop: a
    # tf.function using them traced again each epoch (1.8x slower than eager, measured).
    sites = _sites(
        """
        for epoch in range(3):
            epoch_loss_avg = tf.keras.metrics.Mean()
            acc = tf.keras.metrics.SparseCategoricalAccuracy()
            total = keras.losses.MeanSquaredError()
            with ctx:
                for x, y in ds:
                    loss_value, grads = grad(model, x, y)
                    optimizer.apply_gradients(zip(grads, model.trainable_variables))
                    epoch_loss_avg.update_state(loss_value)
                    total(y, y)
            print(acc.result())
        """
    )
    assert sites[7].fresh_metrics == (("epoch_loss_avg",), 2)
    assert sites[2].fresh_metrics == ((), 0)
    made_once = _sites(
        """
        acc = tf.keras.metrics.Mean()
        for epoch in range(3):
            acc.reset_state()
            for x in ds:
                acc.update_state(x)
        """
    )
    assert all(s.fresh_metrics == ((), 0) for s in made_once.values())


def test_the_model_run_again_on_the_batch_beside_the_step_is_found() -> None:
    # TF's custom training walkthrough: grad(model, x, y) runs the forward pass, then the
    # accuracy metric runs model(x) again (17% of the eager step, without the profiler).
    sites = _sites(
        """
        def grad(model, inputs, targets):
            return model(inputs)

        for x, y in ds:
            loss_value, grads = grad(model, x, y)
            acc.update_state(y, model(x, training=True))
            print(model(x_test))
        """
    )
    assert sites[5].second_forward == (7, "model")
    # On other data (a test set) it is an evaluation, not the batch again.
    other = _sites(
        """
        def grad(model, inputs, targets):
            return model(inputs)

        for x, y in ds:
            loss_value, grads = grad(model, x, y)
            print(model(x_test))
        """
    )
    assert other[5].second_forward == (0, "")
