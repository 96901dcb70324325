"""Kernels by purpose: what a step's TensorFlow kernels are for.

Place in the pipeline: pure analysis over the framework phase's op table
(``profiler.model.records.OpTable``), used by the diagnoses: "compute-bound" means the model's
arithmetic, and kernels that write summaries, save checkpoints, feed the input pipeline, move
variables or talk to other workers are advice of another kind (do them less often, or
elsewhere). Classification is data: ``RULES``, an ordered table of (pattern on the op's type,
purpose), the first match wins; an op no rule names is the model's arithmetic.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

ARITHMETIC = "arithmetic"
SUMMARIES = "summaries"
FILES = "checkpoints and files"
INPUT = "input pipeline"
STATE = "variables and state"
COMMUNICATION = "communication"
#: Strings made into token ids inside the step: a model whose first layer is TextVectorization
#: (TF's word embeddings guide: ~72% of each step, its epochs 4.0x faster with the text
#: vectorized once in a cached map, measured without the profiler).
TEXT = "text preprocessing"
#: A TF1 step's fetches the training does not need (``profiler.capture.collectors.fetches``):
#: by the graph, not by the op's type (a forward pass over the whole data set each step).
FETCHED = "values fetched beside the training"

#: (pattern on the kernel's op type, purpose), first match wins.
RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"Summary|^Write(Scalar|Histogram|Image|Audio|Graph|RawProto)|^Print(V2)?$|"
                r"^StringFormat$|^Flush(Summary)?Writer$"), SUMMARIES),
    (re.compile(r"^(SaveV2|RestoreV2|Save|SaveSlices|Restore|RestoreSlice|MergeV2Checkpoints|"
                r"ShardedFilename|WriteFile|ReadFile|StringJoin)$"), FILES),
    (re.compile(r"Iterator|Dataset|GetNext|^(Py|EagerPy)Func|^Decode|^Parse(Single)?Example|"
                r"^Queue|^ReaderRead"), INPUT),
    (re.compile(r"Collective|AllReduce|^(Send|Recv|_Send|_Recv|_HostSend|_HostRecv)$"),
     COMMUNICATION),
    (re.compile(r"^(String(Split|SplitV2|Lower|Upper|Strip|Length|NGrams|ToHashBucket\w*|"
                r"ToNumber)|StaticRegexReplace|RegexReplace|RegexFullMatch|Substr|Unicode\w+|"
                r"LookupTable(Find|Size)(V2)?)$"), TEXT),
    (re.compile(r"^(ReadVariableOp|VarHandleOp|VariableV2|Variable|AssignVariableOp|Assign|"
                r"Identity|IdentityN|Const|NoOp|_Arg|_Retval|VarIsInitializedOp|"
                r"DestroyResourceOp)$"), STATE),
)  # fmt: skip
#: (pattern on the op's name, purpose): the name scopes TensorFlow's own functions give the
#: ops they add, whatever their types. TF2's ``tf.summary.histogram`` buckets its values with
#: ``OneHot`` and ``Sum`` under ``write_summary/`` (a custom loop writing histograms every step:
#: 95% of its kernels, read "compute-bound ... OneHot 71%, Sum 24%"; the step 4.2x faster
#: without them, measured without the profiler).
NAME_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(^|/)write_summary(/|$)"), SUMMARIES),
    # Keras's TextVectorization layer: its lookups, comparisons and padding too.
    (re.compile(r"(^|/)text_vectorization(_\d+)?(/|$)"), TEXT),
)
#: The purposes whose time is not the model's arithmetic, in the order the advice names them.
OTHERS = (SUMMARIES, FILES, INPUT, TEXT, STATE, COMMUNICATION, FETCHED)
#: What to do about a purpose's kernels when they are a large part of the step.
ADVICE = {
    SUMMARIES: "write the summaries every N steps, not every step (fetch the merged summary "
    "op only when step % N == 0, or tf.summary under tf.summary.record_if)",
    FILES: "save checkpoints and files every N steps or epochs, not every step",
    INPUT: "move the input work out of the step: a tf.data pipeline with map(num_parallel_calls) "
    "and prefetch, or .cache() after a deterministic map",
    STATE: "keep the variables' reads and assignments inside one tf.function or graph call "
    "rather than one call each",
    COMMUNICATION: "fewer, larger all-reduces: larger batches per worker or gradient accumulation",
    TEXT: "make the text into token ids once, before the steps: the TextVectorization layer (or "
    "the string ops) applied in the dataset's map, then .cache() (train_ds.map(lambda x, y: "
    "(vectorize_layer(x), y)).cache().prefetch(tf.data.AUTOTUNE)), not inside the model, where "
    "it runs on every batch of every epoch and of every validation; a model for raw strings "
    "can put the layer before the trained model after training (TF's word embeddings guide: "
    "epochs 4.0x faster so, measured without the profiler)",
    FETCHED: "fetch {fetched} every N steps, not with every training step: sess.run(train_op) "
    "each step, and those values in a session.run of their own when step % N == 0 (or on a "
    "sample of the data)",
}


def purpose(op_type: str, name: str = "", fetched: Collection[str] = ()) -> str:
    """The purpose of a kernel of op type ``op_type`` named ``name``: ``NAME_RULES`` on its
    name, then ``RULES`` on its type; an op neither names is ``FETCHED`` where ``fetched``, the
    ops only the values fetched beside the training need, has its name (a merged summary
    fetched beside the training stays summaries), else the model's arithmetic."""
    for pattern, what in NAME_RULES:
        if name and pattern.search(name):
            return what
    for pattern, what in RULES:
        if pattern.search(op_type):
            return what
    return FETCHED if name and name in fetched else ARITHMETIC


def shares(rows: Iterable[tuple[str, str, float]]) -> dict[str, float]:
    """Each purpose's share of kernel time, from (op type, op name, share of kernel time)
    rows."""
    out: dict[str, float] = {}
    for op_type, name, share in rows:
        what = purpose(op_type, name)
        out[what] = out.get(what, 0.0) + share
    return out
