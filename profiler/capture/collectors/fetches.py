"""What a TF1 step's ``session.run`` fetches beside its training ops, and the ops only that needs.

Place in the pipeline: the collector edge of the framework phase's FULL_TRACE steps
(``profiler.capture.phases.framework`` calls ``beside_training`` with the first traced call's
fetches). A course's loop fetching its predictions on the whole training set with every
training step (``sess.run([train, loss, full_pred])``, a forward pass over 50,000 rows) spent
86-92% of its loop on that fetch, measured without the profiler, and was told "compute-bound:
a faster step needs less arithmetic". The kernels were the model's ops, but not the training's:
those ops are found here from the graph (each fetch's inputs, followed to the graph's sources,
less those the training ops need), and the analysis books their kernels apart
(``profiler.analysis.purposes.FETCHED``).

A training op is a fetched ``Operation`` (``minimize``'s, a ``tf.group``): tensors fetched
beside it (the loss, an accuracy, predictions, a merged summary) are the others. A fetch that is
an input of a training op (the loss) needs no op of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from profiler.model.records import BesideFetch

#: Op names kept for one fetch (the analysis matches them to the op table's rows).
MAX_OPS = 5_000


def _flatten(fetches: Any) -> list[Any]:
    """The graph elements of a ``session.run`` fetch structure (lists, tuples, dicts, names)."""
    if isinstance(fetches, Mapping):
        return [x for v in fetches.values() for x in _flatten(v)]
    if isinstance(fetches, list | tuple):
        return [x for v in fetches for x in _flatten(v)]
    return [fetches]


def _ops_needed(roots: Iterable[Any]) -> set[Any]:
    """Every op the ``roots`` ops need: their inputs' ops and control inputs, followed."""
    seen: set[Any] = set()
    todo = list(roots)
    while todo:
        op = todo.pop()
        if op in seen:
            continue
        seen.add(op)
        todo.extend(t.op for t in op.inputs)
        todo.extend(op.control_inputs)
    return seen


def beside_training(graph: Any, fetches: Any) -> tuple[BesideFetch, ...]:
    """The values ``fetches`` holds beside its training ops, each with the ops only it needs;
    empty where it holds no training op, or where anything in it cannot be resolved."""
    try:
        elements = [graph.as_graph_element(e) for e in _flatten(fetches)]
    except (TypeError, ValueError, KeyError):
        return ()
    training = [e for e in elements if not hasattr(e, "op") and hasattr(e, "inputs")]
    tensors = [e for e in elements if hasattr(e, "op")]
    if not training or not tensors:
        return ()
    needed = _ops_needed(training)
    out: list[BesideFetch] = []
    for tensor in tensors:
        own = _ops_needed([tensor.op]) - needed
        if own:
            names = sorted(op.name for op in own)[:MAX_OPS]
            out.append(BesideFetch(fetch=str(tensor.name), ops=tuple(names)))
    return tuple(out)
