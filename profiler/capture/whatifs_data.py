"""tf.data what-ifs: the script's input pipeline with ``prefetch(AUTOTUNE)`` added, or with its
serial maps run with ``num_parallel_calls=AUTOTUNE``, read by the loop in the variant's blocks.

Place in the pipeline: the script process, one of ``profiler.capture.whatifs``'s builders. The
pipeline is the one the loop iterates (``Pipelines.current``: the most iterated dataset, its
latest iterator). The variant is a second pipeline built from the first one's own graph (the
serialised dataset, its ``MapDataset`` nodes rewritten as ``ParallelMapDatasetV2``, or a
prefetch on top), iterated from its first element: its blocks read their batches from it, by
the loop's own ``next()`` (the iterator's ``_next_internal``, shadowed on the instance). The
training therefore sees other batches in those blocks than the loop's next ones: these
what-ifs may change results and run only with ``--whatif all``.

Both use tf.data's private API (an iterator's ``_next_internal``; for the parallel maps a
dataset's serialised graph, ``_VariantDataset`` and the ``DatasetFromGraph`` op): each builder
checks for what it uses first (``_missing``), and a TensorFlow without it gets the what-if not
run, with a note naming what is missing and the version.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from profiler.capture import tf_internals
from profiler.capture.script.driver import StepDriver
from profiler.capture.variant import Variant, error_line

TF_DATA_PREFETCH = "tf_data_prefetch"
TF_DATA_PARALLEL = "tf_data_parallel"

_RESULTS = (
    "its blocks read batches from a second iterator over the same pipeline, from its first "
    "element: the steps there train on other batches than the loop's next ones"
)


def _pipeline(driver: StepDriver) -> tuple[Any, Any, Any] | str:
    got = driver.facts.pipelines.current()
    if got is None:
        return "the loop iterates no tf.data pipeline"
    return got


def _missing(driver: StepDriver, ds: Any, it: Any, graph: bool) -> str | None:
    """None if this TensorFlow has the tf.data internals the variant uses (the iterator's
    ``_next_internal`` where the loop reads it, and with ``graph`` those of
    ``_parallel_maps``), else the note saying what is missing."""
    missing: list[str] = []
    if getattr(driver.facts.model if driver.facts.fit else None, "train_function", None) is None:
        missing += [
            f"tensorflow.python.data.ops.iterator_ops.OwnedIterator.{m}"
            for m in tf_internals.missing_attributes(it, ("_next_internal",))
        ]
    if graph:
        missing += [
            f"tensorflow.python.data.ops.dataset_ops.DatasetV2.{m}"
            for m in tf_internals.missing_attributes(ds, ("_as_serialized_graph",))
        ]
        for module, names in (
            ("tensorflow.python.data.ops.dataset_ops", ("_VariantDataset",)),
            ("tensorflow.python.ops.gen_experimental_dataset_ops", ("dataset_from_graph",)),
        ):
            try:
                found = importlib.import_module(module)
            except ImportError:
                missing.append(module)
                continue
            missing += [f"{module}.{m}" for m in tf_internals.missing_attributes(found, names)]
    return tf_internals.missing_note("this what-if", ", ".join(missing)) if missing else None


def prefetch(driver: StepDriver) -> Variant | str:
    """The pipeline with ``prefetch(tf.data.AUTOTUNE)`` at its end, where it has none and
    tf.data injects none."""
    got = _pipeline(driver)
    if isinstance(got, str):
        return got
    ds, pipe, it = got
    if any(s.kind == "prefetch" for s in pipe.stages):
        return "the pipeline prefetches already"
    if pipe.auto_prefetch:
        return "tf.data adds a prefetch to this pipeline by default (inject_prefetch)"
    missing = _missing(driver, ds, it, graph=False)
    if missing is not None:
        return missing
    import tensorflow as tf

    return _variant(
        driver,
        it,
        lambda: ds.prefetch(tf.data.AUTOTUNE),
        TF_DATA_PREFETCH,
        "the input pipeline with .prefetch(tf.data.AUTOTUNE) at its end",
        1.0,
    )


def parallel(driver: StepDriver) -> Variant | str:
    """The pipeline's serial maps run with ``num_parallel_calls=tf.data.AUTOTUNE`` (where
    tf.data does not parallelise them itself: maps that call Python, or its default
    optimisations off)."""
    got = _pipeline(driver)
    if isinstance(got, str):
        return got
    ds, pipe, it = got
    serial = [s for s in pipe.stages if s.kind == "map" and not s.parallel]
    if not serial:
        return "the pipeline has no serial map"
    if pipe.auto_parallel and not any(s.python for s in serial):
        return "tf.data parallelises these maps by default (map_parallelization)"
    missing = _missing(driver, ds, it, graph=True)
    if missing is not None:
        return missing
    names = ", ".join(s.function or "map" for s in serial)
    cores = max(os.cpu_count() or 1, 1)
    return _variant(
        driver,
        it,
        lambda: _parallel_maps(ds),
        TF_DATA_PARALLEL,
        f"the pipeline's maps ({names}) with num_parallel_calls=tf.data.AUTOTUNE",
        1 - 1 / cores,
    )


def _variant(
    driver: StepDriver, it: Any, build: Any, key: str, title: str, share: float
) -> Variant:
    """The variant's iterator read in the loop's place: by the loop's ``next()`` (the
    iterator's ``_next_internal``, shadowed on the instance) or, in fit, given to its train
    function (fit reads its iterator inside it; the same element spec: the same trace)."""
    model: Any = driver.facts.model if driver.facts.fit else None
    base: Any = getattr(model, "train_function", None)
    made: list[Any] = []

    def next_variant() -> Any:
        try:
            return made[0]._next_internal()
        except Exception as exc:  # its end, or it cannot run: off, this step as written
            failed(exc)
            return it._next_internal()

    def fed(iterator: Any) -> Any:
        try:
            return base(made[0])
        except Exception as exc:  # its end (StopIteration too), or it cannot run: off
            failed(exc)
            return base(iterator)

    def install() -> None:
        if base is not None:
            model.train_function = fed
        else:
            it._next_internal = next_variant

    def off() -> None:
        if base is not None:
            model.train_function = base
        else:
            it.__dict__.pop("_next_internal", None)

    def failed(exc: BaseException) -> None:
        ended = isinstance(exc, StopIteration) or type(exc).__name__ == "OutOfRangeError"
        variant.errors.append(
            "the variant's iterator reached its end" if ended else error_line(exc)
        )
        off()

    def on() -> None:
        if variant.errors:
            return
        if not made:
            try:
                made.append(iter(build()))
            except Exception as exc:
                variant.errors.append(error_line(exc))
                return
        install()

    variant = Variant(key, title, ("feed_fetch",), False, _RESULTS, on, off, share=share)
    return variant


def _parallel_maps(ds: Any) -> Any:
    """``ds`` rebuilt from its serialised graph with each ``MapDataset`` node a
    ``ParallelMapDatasetV2`` with ``num_parallel_calls`` AUTOTUNE (-1)."""
    import tensorflow as tf
    from tensorflow.core.framework import graph_pb2
    from tensorflow.python.data.ops import dataset_ops
    from tensorflow.python.framework import tensor_util
    from tensorflow.python.ops import gen_experimental_dataset_ops

    graph = graph_pb2.GraphDef()
    graph.ParseFromString(
        ds._as_serialized_graph(
            external_state_policy=tf.data.experimental.ExternalStatePolicy.WARN,
            strip_device_assignment=False,
        ).numpy()
    )
    out = graph_pb2.GraphDef()
    out.CopyFrom(graph)
    del out.node[:]
    for node in graph.node:
        if node.op != "MapDataset":
            out.node.add().CopyFrom(node)
            continue
        const = out.node.add()
        const.name, const.op = f"{node.name}/whatif_num_parallel_calls", "Const"
        const.attr["dtype"].type = tf.int64.as_datatype_enum
        const.attr["value"].tensor.CopyFrom(tensor_util.make_tensor_proto(-1, tf.int64))
        rewritten = out.node.add()
        rewritten.CopyFrom(node)
        rewritten.op = "ParallelMapDatasetV2"
        data = [i for i in node.input if not i.startswith("^")]
        control = [i for i in node.input if i.startswith("^")]
        del rewritten.input[:]
        rewritten.input.extend([*data, const.name, *control])
        rewritten.attr.pop("force_synchronous", None)
        rewritten.attr["deterministic"].s = b"default"
    variant = gen_experimental_dataset_ops.dataset_from_graph(out.SerializeToString())
    return dataset_ops._VariantDataset(variant, ds.element_spec)
