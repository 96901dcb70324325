"""TensorFlow's private internals, checked before use: what is missing steps aside with a note.

No TensorFlow runs here: each part is handed a stand-in without the attribute it needs (a
hook point, a detector's class, a what-if's private method), as a TensorFlow outside the tested
range could be. ``tests/test_install.py`` runs the real thing against TensorFlow 2.20.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from profiler.capture import tf_internals
from profiler.capture.collectors.hooks import HookPoint, Target
from profiler.model.records import HooksData

# --- the tested range ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "known"),
    [
        ("2.16.1", True),
        ("2.20.0", True),
        ("2.21.0rc1", True),
        ("2.15.1", False),
        ("2.22.0", False),
        ("3.0.0", False),
        ("nightly", False),
    ],
)
def test_the_tested_range_is_known_tf(version: str, known: bool) -> None:
    assert tf_internals.KNOWN_TF == ((2, 16), (2, 21))
    assert tf_internals.is_known(version) is known
    note = tf_internals.tf_version_note(version)
    if known:
        assert note is None
    else:
        assert note is not None and version in note and "2.16–2.21" in note


def test_the_missing_note_names_what_is_missing_the_version_and_the_range() -> None:
    note = tf_internals.missing_note("the hooks phase", "m.Function.__call__", "2.22.0")
    assert note == (
        "the hooks phase needs m.Function.__call__, which TensorFlow 2.22.0 does not have (this "
        "toolkit knows the internals of TensorFlow 2.16–2.21; 2.22.0 is not among them)"
    )
    inside = tf_internals.missing_note("x", "m.f", "2.20.0")
    assert inside.endswith("(this toolkit knows the internals of TensorFlow 2.16–2.21)")


def test_a_patched_class_attribute_must_be_the_class_own() -> None:
    class Base:
        def run(self) -> None: ...

    class Session(Base):
        def close(self) -> None: ...

    module = types.SimpleNamespace(Session=Session, helper=len)
    # Every class is callable and inherits ``run``: neither is in its own namespace to patch.
    got = tf_internals.missing_attributes(
        module, ("Session.close", "Session.run", "Session.__call__", "helper", "Nope.run", "gone")
    )
    assert got == ["Session.run", "Session.__call__", "Nope.run", "gone"]
    assert tf_internals.missing_attributes(Session(), ("run", "close")) == []


# --- the hooks phase -------------------------------------------------------------------------


def _module(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    mod = types.ModuleType("fake_tf_internal")

    def present(x: int) -> int:
        return x + 1

    mod.present = present  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    return mod


def _target(required_missing: bool) -> Target:
    return Target(
        name="tf_function",
        points=(
            HookPoint("function_call", "fake_tf_internal", "present", "a call"),
            HookPoint("bind_args", "fake_tf_internal", "absent", "gone", required_missing),
        ),
        intervals={},
        derived={"outside_call": ("wall", ("function_call", "bind_args"))},
        partition=("outside_call", "function_call", "bind_args"),
        categories={"outside_call": "python", "function_call": "python", "bind_args": "python"},
        outside="outside_call",
    )


def _ctx(tmp_path: Any) -> Any:
    from profiler.capture.phases import PhaseContext
    from profiler.clock import now_ns
    from profiler.model import WorkDecl
    from profiler.workloads import get
    from profiler.workloads.base import Loop, LoopInfo

    loop = Loop(
        step=lambda: None,
        work=WorkDecl(1, 1, 1, 1, 1),
        params=dict,
        eval_loss=lambda _p: 0.0,
        info=LoopInfo(kind="tf2", mode="function"),
    )
    return PhaseContext(get("tf2_function_step"), loop, tmp_path, tmp_path, now_ns)


def test_a_missing_required_hook_point_makes_the_phase_unavailable_with_the_version(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from profiler.capture.phases import Budget, PhaseUnavailable, hooks

    mod = _module(monkeypatch)
    original = mod.present
    monkeypatch.setattr(hooks, "TF2", _target(required_missing=True))
    monkeypatch.setattr(tf_internals, "tf_version", lambda: "2.99.0")
    phase = hooks.HooksPhase(Budget(1, 1, 10), {})
    with pytest.raises(PhaseUnavailable) as err:
        phase.install(_ctx(tmp_path))
    assert str(err.value) == (
        "the hooks phase needs fake_tf_internal.absent, which TensorFlow 2.99.0 does not have "
        "(this toolkit knows the internals of TensorFlow 2.16–2.21; 2.99.0 is not among them)"
    )
    assert mod.present is original  # nothing was patched


def test_a_missing_optional_hook_point_is_left_out_with_a_note(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from profiler.capture.phases import Budget, hooks
    from profiler.model import Segment, Window

    mod = _module(monkeypatch)
    original = mod.present
    monkeypatch.setattr(hooks, "TF2", _target(required_missing=False))
    monkeypatch.setattr(tf_internals, "tf_version", lambda: "2.22.0")
    ctx = _ctx(tmp_path)
    phase = hooks.HooksPhase(Budget(1, 1, 10), {"hooks_cost_pairs": 0})
    phase.install(ctx)
    assert mod.present is not original
    timers = phase.step_wrapper(ctx)
    marks = [ctx.clock()]
    for i in range(3):
        with timers(i):  # type: ignore[misc]
            assert mod.present(i) == i + 1
        marks.append(ctx.clock())
    record = phase.remove(ctx, Window("hooks", (Segment(0, tuple(marks)),)))
    assert mod.present is original
    assert record.status == "ok" and isinstance(record.data, HooksData)
    assert record.data.calls_per_step == {"function_call": 1.0, "bind_args": 0.0}
    assert record.data.note.startswith(
        "timing bind_args on its own needs fake_tf_internal.absent, which TensorFlow 2.22.0 "
        "does not have"
    )
    assert "its time is in the hooked call around it" in record.data.note
    assert "TensorFlow 2.22.0 is outside the versions this toolkit was tested with" in (
        record.data.note
    )


# --- the script's step detectors -------------------------------------------------------------


def _driver() -> Any:
    from profiler.capture.script.driver import StepDriver
    from profiler.clock import now_ns

    return StepDriver(now_ns)


def test_a_detector_without_its_class_attribute_steps_aside_with_a_note(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from profiler.capture.script import detect

    monkeypatch.setattr(tf_internals, "tf_version", lambda: "2.99.0")
    driver = _driver()
    patches = detect.Patches(driver)

    class Function:  # no __call__ of its own
        pass

    class BaseSession:
        def run(self) -> str:
            return "ran"

    session = types.ModuleType(detect._SESSION)
    session.BaseSession = BaseSession  # type: ignore[attr-defined]
    function = types.ModuleType(detect._FUNCTION)
    function.Function = Function  # type: ignore[attr-defined]
    patches.function(function)
    patches.session(session)
    assert "__call__" not in vars(Function)
    assert driver.raw_function_call is None
    assert patches.applied == ["tf1_session: BaseSession.run"]
    (note,) = driver.facts.notes
    assert note.startswith(
        f"detecting tf.function steps needs {detect._FUNCTION}.Function.__call__, which "
        "TensorFlow 2.99.0 does not have"
    )
    patches.restore()
    assert vars(BaseSession)["run"](BaseSession()) == "ran"


def test_after_import_tensorflow_modules_it_lacks_and_an_untested_version_are_noted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from profiler.capture.script import detect

    gone = "tensorflow.python.no_such_module"
    monkeypatch.setattr(detect, "_TF_MODULES", {gone: "session.run steps"})
    driver = _driver()
    tf = types.ModuleType("tensorflow")
    tf.__version__ = "2.23.1"  # type: ignore[attr-defined]
    detect.Patches(driver).tensorflow(tf)
    missing, untested = driver.facts.notes
    assert missing.startswith(f"detecting session.run steps needs module {gone}, which")
    assert "TensorFlow 2.23.1 does not have" in missing
    assert untested.startswith("TensorFlow 2.23.1 is outside the versions")

    driver = _driver()
    monkeypatch.setattr(detect, "_TF_MODULES", {})
    tf.__version__ = "2.21.0"  # type: ignore[attr-defined]
    detect.Patches(driver).tensorflow(tf)
    assert driver.facts.notes == []


# --- the what-ifs ----------------------------------------------------------------------------


def test_what_ifs_without_their_private_api_are_not_run_and_say_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from profiler.capture import whatifs, whatifs_data

    monkeypatch.setattr(tf_internals, "tf_version", lambda: "2.99.0")
    driver = _driver()
    driver.facts.session = object()  # no _make_callable_from_options
    driver.facts.session_call = (("loss:0",), {})
    why = whatifs.tf1_callable(driver)
    assert isinstance(why, str) and why.startswith(
        "this what-if needs tensorflow.python.client.session.BaseSession."
        "_make_callable_from_options, which TensorFlow 2.99.0 does not have"
    )

    class Model:  # Keras without jit_compile, and a factory without force=
        train_function = staticmethod(lambda iterator: None)

        def make_train_function(self) -> None: ...

    driver.facts.model, driver.facts.fit = Model(), {"epochs": 1}
    why = whatifs.keras_jit(driver)
    assert isinstance(why, str) and why.startswith(
        "this what-if needs keras.Model.jit_compile, which TensorFlow 2.99.0"
    )
    Model.jit_compile = False  # type: ignore[attr-defined]
    why = whatifs.keras_jit(driver)
    assert isinstance(why, str) and "keras.Model.make_train_function(force=...)" in why

    driver.facts.fit = {}
    assert whatifs_data._missing(driver, object(), object(), graph=False) == (
        tf_internals.missing_note(
            "this what-if", "tensorflow.python.data.ops.iterator_ops.OwnedIterator._next_internal"
        )
    )
    iterator = types.SimpleNamespace(_next_internal=lambda: None)
    assert whatifs_data._missing(driver, object(), iterator, graph=False) is None
