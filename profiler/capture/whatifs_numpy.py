"""The numpy what-if: the script's float64 arrays as float32 (``astype(np.float32)``) in the
variant's blocks, and back to float64 after each.

Place in the pipeline: the script process, one of ``profiler.capture.whatifs``'s builders, the
only one offered to a script without TensorFlow. The arrays are those the script's names hold
(the way ``profiler.capture.memory_causes`` walks them): ``__main__``'s globals, the locals of
the main thread's frames that run the script's file, one attribute deep, and the items of the
lists, tuples and dicts among those. ``on`` rebinds each name to a float32 copy (one copy per
array: two names of one array keep holding one array), ``off`` rebinds the same names to a
float64 copy of what they hold then, so the training goes on from where the block left it.

A running frame's locals are written through ``frame.f_locals``; CPython before 3.13 keeps such
a write only when ``PyFrame_LocalsToFast`` follows it (the interpreter calls it after a trace
function's callback; ``on`` runs inside a step mark's call, not a trace callback, so it calls it
itself through ``ctypes``). Each local write is read back: a name whose write did not persist
is left as it was and named in the variant's note.
"""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from profiler.capture.variant import Variant, error_line

NUMPY_FLOAT32 = "numpy_float32"

#: The float64 elements the script's names must hold in all for the what-if to apply. Below
#: ~10,000, numpy's per-call cost (~1-5 µs a ufunc call) is as long as the arithmetic itself,
#: so a narrower dtype has little to save (the brief's threshold, not a measured optimum).
MIN_ELEMENTS = 10_000
#: The share of the compute category float32 removes: twice the elements per SIMD register and
#: per byte of memory traffic, single-precision BLAS at about twice double's throughput, so at
#: best half the arithmetic's time (measured on this machine's MLP: 1.5-2x, see the test).
SHARE = 0.5
#: Attributes and container items looked at per object (a long list of samples is not walked).
MAX_ITEMS = 200

TITLE = "float32 arrays (astype(np.float32))"
RESULTS_NOTE = (
    "results differ at float32 precision during the blocks: the script's float64 arrays are "
    "float32 there, and float64 copies of them (rounded to float32) after"
)


@dataclass
class Slot:
    """One place holding an array: ``label`` (``W1``, ``train().X``, ``model.W``, ``params[0]``),
    how to read it and how to rebind it (``put`` returns whether the rebinding holds)."""

    label: str
    get: Callable[[], Any]
    put: Callable[[Any], bool]


def _main_file() -> str | None:
    return getattr(sys.modules.get("__main__"), "__file__", None)


def _frames(script: str | None) -> Iterator[types.FrameType]:
    """The main thread's frames running the script's functions (innermost first)."""
    if threading.current_thread() is threading.main_thread():
        frame: types.FrameType | None = sys._getframe(1)
    else:
        frame = sys._current_frames().get(threading.main_thread().ident or -1)
    while frame is not None:
        code = frame.f_code
        if script is not None and code.co_filename == script and code.co_name != "<module>":
            yield frame
        frame = frame.f_back


def write_local(frame: types.FrameType, name: str, value: Any) -> bool:
    """Rebind a running frame's local; whether the frame now holds ``value`` there."""
    frame.f_locals[name] = value
    if sys.version_info < (3, 13):  # 3.13+: f_locals writes through (PEP 667)
        import ctypes

        to_fast = getattr(ctypes.pythonapi, "PyFrame_LocalsToFast", None)
        if to_fast is not None:
            to_fast(ctypes.py_object(frame), ctypes.c_int(0))
    return frame.f_locals.get(name) is value


def _skip(obj: Any) -> bool:
    return isinstance(obj, (type, types.ModuleType, types.FunctionType, types.MethodType))


def _inside(label: str, obj: Any, put: Callable[[Any], bool]) -> Iterator[Slot]:
    """Slots for the arrays a container holds (a tuple's items are rebound by rebinding the
    tuple where it is held)."""
    import numpy as np

    if isinstance(obj, list):
        for i, v in enumerate(obj[:MAX_ITEMS]):
            if isinstance(v, np.ndarray):
                yield Slot(f"{label}[{i}]", _item(obj, i), _set_item(obj, i))
    elif isinstance(obj, dict):
        for k, v in list(obj.items())[:MAX_ITEMS]:
            if isinstance(v, np.ndarray):
                yield Slot(f"{label}[{k!r}]", _item(obj, k), _set_item(obj, k))
    elif isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        box = [obj]  # the tuple as rebound so far (its items are replaced one by one)
        for i, v in enumerate(obj[:MAX_ITEMS]):
            if isinstance(v, np.ndarray):
                yield Slot(f"{label}[{i}]", _item(obj, i), _set_tuple_item(box, i, put))


def _set_item(container: Any, key: Any) -> Callable[[Any], bool]:
    def put(value: Any) -> bool:
        container[key] = value
        return True

    return put


def _set_tuple_item(box: list[Any], i: int, put: Callable[[Any], bool]) -> Callable[[Any], bool]:
    """Rebinds the tuple's holder to a tuple with item ``i`` replaced (``box``: the tuple as
    rebound by the items before it)."""

    def set_item(value: Any) -> bool:
        items = list(box[0])
        items[i] = value
        box[0] = tuple(items)
        return put(box[0])

    return set_item


def slots(script: str | None = None) -> Iterator[Slot]:
    """Every place of the script's names holding a numpy array (a name holding another kind
    of object is looked into one attribute deep, a container one item deep)."""
    import numpy as np

    script = script or _main_file()
    roots: list[tuple[str, Any, Callable[[Any], bool]]] = []
    main = sys.modules.get("__main__")
    if main is not None:
        g = vars(main)
        for k, v in list(g.items()):
            if not k.startswith("__"):
                roots.append((k, v, _set_item(g, k)))
    for frame in _frames(script):
        owner = frame.f_code.co_name
        for k, v in list(frame.f_locals.items()):
            roots.append((f"{owner}().{k}", v, _set_local(frame, k)))
    for name, obj, put in roots:
        if isinstance(obj, np.ndarray):
            yield Slot(name, _const(obj), put)
            continue
        if _skip(obj):
            continue
        if isinstance(obj, (list, dict, tuple)):
            yield from _inside(name, obj, put)
            continue
        attrs = getattr(obj, "__dict__", None)
        if not isinstance(attrs, dict):
            continue
        for k, v in list(attrs.items())[:MAX_ITEMS]:
            label = f"{name}.{k}"
            if isinstance(v, np.ndarray):
                yield Slot(label, _attr(obj, k), _set_attr(obj, k))
            elif isinstance(v, (list, dict, tuple)):
                yield from _inside(label, v, _set_attr(obj, k))


def _item(container: Any, key: Any) -> Callable[[], Any]:
    return lambda: container[key]


def _attr(obj: Any, name: str) -> Callable[[], Any]:
    return lambda: getattr(obj, name)


def _const(obj: Any) -> Callable[[], Any]:
    return lambda: obj


def _set_local(frame: types.FrameType, name: str) -> Callable[[Any], bool]:
    return lambda value: write_local(frame, name, value)


def _set_attr(obj: Any, name: str) -> Callable[[Any], bool]:
    def put(value: Any) -> bool:
        setattr(obj, name, value)
        return getattr(obj, name) is value

    return put


def _float64(obj: Any) -> bool:
    import numpy as np

    return isinstance(obj, np.ndarray) and obj.dtype == np.float64


def _float32(obj: Any) -> bool:
    import numpy as np

    return isinstance(obj, np.ndarray) and obj.dtype == np.float32


def _rebind(found: list[tuple[Slot, Any]], dtype: Any) -> list[str]:
    """Each slot's array as ``dtype`` (one copy per array, so names of one array stay one);
    the labels whose rebinding did not hold."""
    copies: dict[int, Any] = {}
    left = []
    for slot, arr in found:
        new = copies.get(id(arr))
        if new is None:
            new = copies[id(arr)] = arr.astype(dtype)
        if not slot.put(new):
            left.append(slot.label)
    return left


def numpy_float32(script_globals: dict[str, Any] | None) -> Variant | str:
    """The script's float64 arrays as float32 in the variant's blocks (numpy's own kernels in
    single precision: ``float32 @ float32`` is sgemm, a ufunc of float32 arrays stays float32;
    a Python float keeps it float32, a float64 array or scalar of the script's own would not)."""
    if "tensorflow" in sys.modules:
        return "the script uses TensorFlow: its dtypes are TensorFlow's (a numpy-only what-if)"
    if "numpy" not in sys.modules:
        return "the script does not use numpy"
    import numpy as np

    found = [(s, s.get()) for s in slots()]
    arrays = {id(a): a for _s, a in found if _float64(a)}
    total = sum(int(a.size) for a in arrays.values())
    if not arrays:
        return "no float64 arrays of the script's"
    if total < MIN_ELEMENTS:
        return (
            f"the script's float64 arrays hold {total:,} elements in all (fewer than "
            f"{MIN_ELEMENTS:,}: too small for the dtype to matter)"
        )
    #: The names rebound to float32 since the last ``off`` (``on`` runs twice in a row where
    #: one pair's blocks end with the variant and the next pair's begin with it).
    converted: set[str] = set()
    left: set[str] = set()

    def on() -> None:
        if variant.errors:
            return
        try:
            now = [(s, a) for s in slots() if _float64(a := s.get())]
            # Marked first: if a rebinding raises, ``off`` still puts back those done before
            # it (it converts only what holds float32 then).
            converted.update(s.label for s, _a in now)
            failed = _rebind(now, np.float32)
        except Exception as exc:
            variant.errors.append(error_line(exc))
            return
        converted.difference_update(failed)
        if failed and not left.issuperset(failed):
            left.update(failed)
            variant.title = _title(left)

    def off() -> None:
        wanted = set(converted)
        try:
            now = [(s, s.get()) for s in slots() if s.label in wanted]
            if not variant.errors:
                promoted(sorted({s.label for s, a in now if _float64(a)}))
            back = [(s, a) for s, a in now if _float32(a)]
            _rebind(back, np.float64)
        except Exception as exc:  # recorded; the step runs on with what the names hold
            variant.errors.append(error_line(exc))
        converted.clear()

    def promoted(again: list[str]) -> None:
        # Arrays float64 again after the block: an operand of the step promoted them (0/1
        # labels kept as int64 in a numpy L-layer net: float32 - int64 is float64, and the
        # weights went back to float64 at the first update). The blocks then time a loop of
        # both precisions, converting between them (1.16x slower, where float32 throughout
        # was 1.9x faster): not float32's effect.
        if not again:
            return
        ints = sorted(
            {
                s.label
                for s in slots()
                if isinstance(a := s.get(), np.ndarray) and a.dtype.kind in "iu"
            }
        )
        by = f", such as an integer array beside them: {_names(ints)}" if ints else ""
        # Made anew, not only promoted: a loop loading each batch with np.load rebinds X to
        # float64 every step ("promoted by an operand of the step" misnamed it).
        variant.errors.append(
            f"float32 did not hold through the steps: {_names(again)} were float64 again "
            f"after a block, made anew in float64 by the step (from an operand{by}, or data "
            "read as float64); a float32 step needs those as float32 too (labels and masks "
            "included)"
        )

    variant = Variant(
        NUMPY_FLOAT32,
        TITLE,
        ("compute",),
        False,
        RESULTS_NOTE,
        on,
        off,
        share=SHARE,
    )
    variant.check = (
        f"{len(arrays)} float64 arrays of the script's ({total:,} elements) found before the "
        "blocks; results not compared (float32 changes them)"
    )
    return variant


def _names(labels: list[str]) -> str:
    return ", ".join(labels[:6]) + (" ..." if len(labels) > 6 else "")


def _title(left: set[str]) -> str:
    names = _names(sorted(left))
    return f"{TITLE}; left float64 (a running function's locals that could not be rebound): {names}"
