"""A user script's source: read and checked before anything runs; steps marked in its tree.

Place in the pipeline: ``cli`` calls ``load`` and the ``mark_*`` functions on the parent's side to
reject bad input (exit 2, nothing written); the script process (``profiler.capture.script.worker``)
calls them again on its own copy and compiles the marked tree, so the script runs with
``--step-function`` and ``--step-line`` marks compiled in.

Marks are calls compiled into the script rather than a trace function: ``sys.settrace`` fires
on *every* Python call of the thread (numpy's Python wrappers included), several hundred ns
each, while a compiled call costs one global lookup and one call per step. Line numbers stay
those of the file, so tracebacks and line tables read as usual.

* ``--step-function NAME``: the function definition gets ``__profiler_step_function__`` as its
  outermost decorator, so each call of the final object (after the script's own decorators) is
  one step.
* ``--step-line [FILE:]LINE``: a call to ``__profiler_step_line__`` is inserted before the
  statement starting at LINE (into the body's start when LINE is a ``for``/``while`` header),
  and ``__profiler_step_line_end__`` after the loop holding it: each execution of the line ends
  the previous step, and leaving the loop ends the last one.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

#: Names the marks call; the script process puts them in the script's globals.
STEP_FUNCTION = "__profiler_step_function__"
STEP_LINE = "__profiler_step_line__"
STEP_LINE_END = "__profiler_step_line_end__"

#: Top-level packages whose import means "a framework with many native threads": py-spy's
#: ``--native`` is ruinous there (~75x), so the start-up capture goes without.
FRAMEWORKS = frozenset({"tensorflow", "keras", "tf_keras", "torch", "jax"})

_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


class ScriptError(ValueError):
    """The script or a step option is bad input: one line, exit status 2."""


@dataclass
class Source:
    """A script's path and syntax tree (``tree`` is changed in place by the ``mark_*`` calls)."""

    path: Path
    tree: ast.Module

    def compile(self) -> object:
        """The (marked) tree as a code object, with the script's own file name."""
        ast.fix_missing_locations(self.tree)
        return compile(self.tree, str(self.path), "exec", dont_inherit=True)

    def imports(self) -> set[str]:
        """Top-level package names the script imports anywhere (``import a.b`` -> ``a``)."""
        names: set[str] = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
        return names


#: Signs that a script reads its command line: argument-parsing packages, ``sys.argv``,
#: TensorFlow's ``flags``/``app.run``.
ARGUMENT_PACKAGES = frozenset(
    {"argparse", "optparse", "getopt", "click", "typer", "fire", "docopt", "absl", "hydra"}
)


def reads_arguments(src: Source) -> bool:
    """Whether the script shows any sign of reading its command-line arguments."""
    if src.imports() & ARGUMENT_PACKAGES:
        return True
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Attribute) and node.attr in ("argv", "flags", "FLAGS"):
            return True
        if isinstance(node, ast.Name) and node.id in ("argv", "FLAGS"):
            return True
        if isinstance(node, ast.alias) and node.name in ("argv", "flags"):
            return True
    return False


def load(path: Path) -> Source:
    """Read and compile-check ``path``.

    Raises:
        ScriptError: missing, a directory, unreadable, or not Python (binary data, a syntax
            error, undecodable text); the message says which.
    """
    if not path.exists():
        raise ScriptError(f"no such script: {path}")
    if path.is_dir():
        raise ScriptError(f"{path} is a directory, not a Python script")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ScriptError(f"cannot read {path}: {exc.strerror or exc}") from None
    if b"\0" in data:
        raise ScriptError(f"{path} is not a Python script: it holds binary data (NUL bytes)")
    text = _decode(path, data)
    try:
        tree = ast.parse(text, filename=str(path))
        # Some errors (``return`` outside a function, bad ``nonlocal``) appear only on compile.
        compile(tree, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f" (line {exc.lineno})" if exc.lineno else ""
        raise ScriptError(f"{path} is not a Python script: {exc.msg}{where}") from None
    except (ValueError, UnicodeError) as exc:
        raise ScriptError(f"{path} is not a Python script: {exc}") from None
    return Source(path, tree)


def _decode(path: Path, data: bytes) -> str:
    """The script's text, decoded as ``python SCRIPT`` decodes it (PEP 263).

    UTF-8 unless a coding line (or a BOM) says otherwise, every byte strict: ``ast.parse`` of
    the bytes checks only string literals and names, so a stray Latin-1 byte in a comment would
    run here where ``python`` refuses the file.

    Raises:
        ScriptError: an unknown or conflicting encoding, or bytes the encoding cannot decode.
    """
    try:
        encoding, _lines = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        if exc.msg.startswith("invalid or missing encoding"):
            encoding = "utf-8"  # the first lines are not UTF-8: the strict decode says where
        else:
            raise ScriptError(f"{path} is not a Python script: {exc.msg}") from None
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        where = f"byte 0x{data[exc.start]:02x} on line {line}"
        if encoding.startswith("utf-8"):
            what = f"it is not UTF-8 text and declares no encoding ({where}; see PEP 263)"
        else:
            what = f"it is not {encoding} text as its coding line says ({where})"
        raise ScriptError(f"{path} is not a Python script: {what}") from None


# --- --step-function ----------------------------------------------------------------------


def _definitions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function definition with its qualified name (``f``, ``Cls.m``, ``f.<locals>.g``)."""
    out: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                out.append((name, child))
                visit(child, f"{name}.<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def mark_step_function(src: Source, name: str) -> str:
    """Make each call of the function ``name`` (a name or qualified name) one step.

    Returns:
        The qualified name of the function marked.

    Raises:
        ScriptError: the script defines no such function, or more than one by a bare name.
    """
    defs = _definitions(src.tree)
    hits = [(q, d) for q, d in defs if q == name] or [(q, d) for q, d in defs if d.name == name]
    if not hits:
        known = ", ".join(sorted({q for q, _d in defs})) or "none"
        raise ScriptError(
            f"--step-function {name}: {src.path.name} defines no function {name!r} "
            f"(it defines: {known})"
        )
    if len(hits) > 1:
        several = ", ".join(q for q, _d in hits)
        raise ScriptError(
            f"--step-function {name}: {src.path.name} defines several ({several}); "
            "give the qualified name"
        )
    qualname, node = hits[0]
    deco = ast.copy_location(ast.Name(id=STEP_FUNCTION, ctx=ast.Load()), node)
    # Outermost: each call of the object the script ends up with (e.g. a tf.function) is a step.
    node.decorator_list.insert(0, deco)
    return qualname


# --- --step-line ----------------------------------------------------------------------------


def parse_step_line(text: str, script: Path) -> int:
    """``LINE`` or ``FILE:LINE`` (FILE must be the script itself) -> the line number.

    Raises:
        ScriptError: not a positive line number, or FILE is another file.
    """
    file, sep, line = text.rpartition(":")
    if not line.isdigit() or int(line) < 1:
        raise ScriptError(f"--step-line {text}: give [FILE:]LINE with a positive line number")
    if sep and file:
        named = Path(file)
        same = named.name == script.name if len(named.parts) == 1 else False
        try:
            same = same or named.resolve() == script.resolve()
        except OSError:
            pass
        if not same:
            raise ScriptError(
                f"--step-line {text}: only lines of the script itself ({script.name}) can mark "
                "steps; for code in another module use --step-function or profiler.step()"
            )
    return int(line)


_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def _statement_lists(node: ast.AST) -> list[list[ast.stmt]]:
    lists = []
    for field in _BODIES:
        value = getattr(node, field, None)
        if isinstance(value, list) and value:
            if all(isinstance(v, ast.stmt) for v in value):
                lists.append(value)
            else:  # except handlers and match cases hold their own bodies
                lists.extend(v.body for v in value if isinstance(getattr(v, "body", None), list))
    return lists


def _find(
    tree: ast.Module, line: int
) -> tuple[list[ast.stmt], int, ast.stmt, list[tuple[list[ast.stmt], ast.AST]]] | None:
    """The outermost statement starting at ``line``: (its list, index, itself, ancestors).

    ``ancestors`` holds, outermost first, (the list each ancestor sits in, the ancestor).
    """
    found = None

    def visit(stmts: list[ast.stmt], chain: list[tuple[list[ast.stmt], ast.AST]]) -> bool:
        nonlocal found
        for i, stmt in enumerate(stmts):
            if stmt.lineno == line:
                found = (stmts, i, stmt, chain)
                return True
            end = getattr(stmt, "end_lineno", None) or stmt.lineno
            if stmt.lineno < line <= end:
                for inner in _statement_lists(stmt):
                    if visit(inner, [*chain, (stmts, stmt)]):
                        return True
        return False

    visit(tree.body, [])
    return found


def _call(name: str, at: ast.AST) -> ast.stmt:
    call = ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=[], keywords=[])
    return ast.copy_location(ast.Expr(value=ast.copy_location(call, at)), at)


def mark_step_line(src: Source, line: int) -> str:
    """Make each execution of the statement at ``line`` a step boundary (module docstring).

    Returns:
        What was marked, for the record (``"line 33 (for loop header): each iteration"``).

    Raises:
        ScriptError: no statement starts there, or it runs only once (not in a loop or a
            function).
    """
    hit = _find(src.tree, line)
    if hit is None:
        raise ScriptError(
            f"--step-line {line}: no statement starts at line {line} of {src.path.name}; give "
            "the first line of a statement inside the training loop (or the loop's own line)"
        )
    stmts, index, stmt, chain = hit
    if isinstance(stmt, _LOOPS):
        stmt.body.insert(0, _call(STEP_LINE, stmt))
        stmts.insert(index + 1, _call(STEP_LINE_END, stmt))
        return f"line {line} ({type(stmt).__name__.lower()} loop header): each iteration"
    loops = [(lst, node) for lst, node in chain if isinstance(node, _LOOPS)]
    in_function = any(isinstance(node, _FUNCTIONS) for _lst, node in chain)
    if not loops and not in_function:
        raise ScriptError(
            f"--step-line {line}: line {line} of {src.path.name} is not inside a loop or a "
            "function, so it runs once and cannot mark steps; give a line inside the loop"
        )
    stmts.insert(index, _call(STEP_LINE, stmt))
    if loops:
        # After the innermost loop holding the line: leaving the loop ends its last step.
        outer_list, loop = loops[-1]
        outer_list.insert(outer_list.index(loop) + 1, _call(STEP_LINE_END, loop))  # type: ignore[arg-type]
    return f"line {line}: each execution"


# --- automatic steps: every loop marked, one chosen at run time ----------------------------------

LOOP_MARK = "__profiler_loop__"
LOOP_END = "__profiler_loop_end__"
#: The loops whose iterations call ``LOOP_MARK`` (a bytearray, ``LoopMarks.on``): the marked
#: code reads ``__profiler_loop_on__[k]`` first, a ~20 ns index where a call costs ~0.2 µs.
LOOP_ON = "__profiler_loop_on__"


@dataclass(frozen=True)
class LoopSite:
    """A loop of the script, marked for automatic step detection.

    Attributes:
        index: the argument its marks pass.
        line: its header's line.
        depth: how many loops enclose it (0: outermost in its function or module).
        kind: ``for`` or ``while``.
        function: the function holding it (``<module>`` at the top level).
        training: its code names training (``TRAINING_WORDS``: a loss, gradients, an update,
            an optimizer, epochs, batches): a data-loading loop before the training does not.
        updates: its own body (not a loop inside it) updates the model (``UPDATE_WORDS``, or
            ``w -= lr * grad``): the loop whose iterations are the training steps.
        calls: the functions of the script its own body calls (by name), in order.
    """

    index: int
    line: int
    depth: int
    kind: str
    function: str
    training: bool = False
    updates: bool = False
    #: The script's own functions its body calls directly (``train_step``), in order.
    calls: tuple[str, ...] = ()
    #: Its last line (the loops inside it are between ``line`` and this, in ``function``).
    end_line: int = 0
    #: Names whose value one iteration hands the next (``carried``): a recurrence.
    carried: tuple[str, ...] = ()
    #: It runs once in a while from another loop, not every iteration: it sits under an ``if``
    #: with a modulo inside a loop (``if n % 100 == 0: for ...``), or in a function only
    #: called so (``if n % 100 == 0: gradCheck(...)``), or inside such a loop (``periodic``).
    periodic: bool = False
    #: Its body calls, directly or through the script's functions, a function holding a loop
    #: that updates the model (a CNN's loop over its images calling train(), whose layers'
    #: backprop loops update the weights per filter and per region).
    drives: bool = False
    #: Its own body records gradients on a ``tf.GradientTape`` (a ``with`` of it, or a
    #: ``.gradient(`` call): the forward pass and the gradients are the body's own.
    tape: bool = False
    #: Metric objects its body uses that the loop around it makes anew at each of its
    #: iterations (``epoch_accuracy = tf.keras.metrics.SparseCategoricalAccuracy()`` in the
    #: epoch loop, TF's custom training walkthrough): (the names, that loop's line).
    fresh_metrics: tuple[tuple[str, ...], int] = ((), 0)
    #: A line of its body that calls the model again beside the step's own forward pass (the
    #: model passed to the script's function that runs it, and called there too: TF's
    #: walkthrough's ``epoch_accuracy.update_state(y, model(x, training=True))``, 17% of its
    #: eager step without the profiler): (that line, its model's name); (0, "") if none.
    second_forward: tuple[int, str] = (0, "")
    #: The file holding it, relative to the script's folder, where that is not the script (a
    #: module of the script's own folder it imports: CS231n's ``solver.py``); "" the script.
    file: str = ""


#: Names (identifiers, attributes, keywords; lower-cased) that mark a loop as training: anywhere
#: in the loop (a loss, gradients, an update, an optimizer, a step function) ...
TRAINING_WORDS = re.compile(
    r"loss|grad|backprop|backward|optimi[sz]|minimi[sz]e|update|sgd|"
    r"(^|_)step($|_)|(^|_)fit($|_)|train_on_batch"
)
#: ... or in its header: its variable (``for epoch in``, ``for batch in``) or what it iterates
#: (``range(epochs)``, ``train_dataset``, ``loader``). A data-loading loop that fills
#: ``training_data`` names training in its body only.
TARGET_WORDS = re.compile(r"epoch|batch|step|iter")
ITER_WORDS = re.compile(r"epochs|batches|steps|iterations|dataset|loader|^ds$|_ds$")


#: Names of a model update: an optimizer's step, a train op or step function, a fit call.
UPDATE_WORDS = re.compile(
    r"update|apply_gradients|minimi[sz]e|optimi[sz]er|sgd|train_op|train_step|trainstep|"
    r"train_on_batch|(^|_)step($|_)|(^|_)fit($|_)"
)
#: Names of gradients in an in-place update (``w -= lr * grad``, ``W += -step_size * dW``).
GRADIENT_NAMES = re.compile(r"grad|Grad|nabla|delta|^d[A-Z_]|^d_")


def _direct(loop: ast.For | ast.AsyncFor | ast.While) -> list[ast.AST]:
    """The nodes of a loop's own body: not those of loops or functions inside it."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = list(loop.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (*_LOOPS, *_FUNCTIONS, ast.ClassDef)):
            continue
        out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return out


def _metrics_made(loop: ast.For | ast.AsyncFor | ast.While) -> tuple[frozenset[str], int]:
    """The names a loop's own body assigns a new Keras metric to (``x = ...metrics.Mean()``),
    and its line."""
    names = {
        t.id
        for n in _direct(loop)
        if isinstance(n, ast.Assign)
        and isinstance(n.value, ast.Call)
        and isinstance(n.value.func, ast.Attribute)
        and isinstance(n.value.func.value, ast.Attribute)
        and n.value.func.value.attr == "metrics"
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    return frozenset(names), loop.lineno


def _fresh(
    loop: ast.For | ast.AsyncFor | ast.While, made: tuple[frozenset[str], int]
) -> tuple[tuple[str, ...], int]:
    """The names of ``made`` (an enclosing loop's new metrics) this loop's body uses."""
    names, line = made
    if not names:
        return (), 0
    used = sorted({n.id for n in ast.walk(loop) if isinstance(n, ast.Name) and n.id in names})
    return (tuple(used), line) if used else ((), 0)


def carried(loop: ast.For | ast.AsyncFor | ast.While) -> tuple[str, ...]:
    """The names whose value an iteration of ``loop`` computes from the previous iteration's
    and passes on: read in the body before the body assigns them (``h = np.tanh(W @ x + U @
    h)``, ``dh = Why.T @ dy + dhnext`` before ``dhnext = ...``), or a container read at the loop
    variable's neighbour (``hs[t - 1]``) that the body stores at the loop variable (``hs[t] =
    ...``). Sums over the iterations are not (``dW += a @ b.T``, ``loss = loss + l``, Nielsen's
    ``nabla_b = [nb + dnb for nb, dnb in zip(nabla_b, delta)]``): they vectorise into one
    product or sum. A loop whose iterations carry state cannot run as one call per step."""
    body = [st for st in loop.body if not isinstance(st, (ast.FunctionDef, ast.ClassDef))]
    index = _name_set(loop.target) if isinstance(loop, (ast.For, ast.AsyncFor)) else set()
    plain: set[str] = set()
    stored_at_index: set[str] = set()
    simple: list[ast.stmt] = []

    def flatten(stmts: list[ast.stmt]) -> None:
        for st in stmts:
            if isinstance(st, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
                flatten([*getattr(st, "body", []), *getattr(st, "orelse", [])])
            elif not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                simple.append(st)

    flatten(body)
    for st in simple:
        if isinstance(st, ast.Assign) and not _accumulates(st):
            for t in st.targets:
                if isinstance(t, (ast.Name, ast.Tuple, ast.List)):
                    plain |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)} - _indices(t)
                if (
                    isinstance(t, ast.Subscript)
                    and isinstance(t.value, ast.Name)
                    and _name_set(t.slice) & index
                    and not isinstance(t.slice, ast.BinOp)
                ):
                    stored_at_index.add(t.value.id)
    found: list[str] = []
    assigned: set[str] = set(index)
    for st in simple:
        value: ast.AST | None = (
            st.value if isinstance(st, (ast.Assign, ast.AugAssign, ast.Expr)) else st
        )
        if isinstance(st, ast.Assign) and _accumulates(st):
            value = None
        for n in ast.walk(value) if value is not None else ():
            if (
                isinstance(n, ast.Name)
                and isinstance(n.ctx, ast.Load)
                and n.id in plain
                and n.id not in assigned
                and n.id not in found
            ):
                found.append(n.id)
            if (
                isinstance(n, ast.Subscript)
                and isinstance(n.value, ast.Name)
                and n.value.id in stored_at_index
                and isinstance(n.slice, ast.BinOp)
                and _name_set(n.slice) & index
                and n.value.id not in found
            ):
                found.append(n.value.id)
        if isinstance(st, ast.Assign):
            for t in st.targets:
                if isinstance(t, (ast.Name, ast.Tuple, ast.List)):
                    assigned |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    found += [b for b in _updated_in_place(loop, simple, plain) if b not in found]
    found += [
        st.target.id
        for st in simple
        if isinstance(st, ast.AugAssign)
        and _self_gradient(st)
        and isinstance(st.target, ast.Name)
        and st.target.id not in found
    ]
    return tuple(found)


def _updated_in_place(
    loop: ast.For | ast.AsyncFor | ast.While, simple: list[ast.stmt], fresh: set[str]
) -> list[str]:
    """Arrays the body updates in place at an index (``P[i, :] += ...``) and reads at an index
    another iteration can share: per-sample SGD over (user, item, rating) triples reads the
    rows ``P[i]`` and ``Q[j]`` that earlier samples of that user or item updated. An index is
    an iteration's own when it is a loop variable of ``range`` or ``enumerate``'s count
    (``xs[t] = ...`` then ``xs[t]`` read). Arrays made anew in each iteration (``dy =
    np.copy(...)``; ``dy[k] -= 1``), and those only written (``dW[:, j] += X[i]``, a
    histogram's ``counts[y] += 1``), carry nothing."""
    own = _own_indices(loop)
    updated: list[str] = []
    for st in simple:
        targets = (
            st.targets
            if isinstance(st, ast.Assign)
            else [st.target]
            if isinstance(st, ast.AugAssign)
            else []
        )
        for t in targets:
            if isinstance(t, ast.Subscript) and isinstance(t.value, (ast.Name, ast.Attribute)):
                base = ast.unparse(t.value)
                if base.split(".")[0] not in fresh and base not in updated:
                    updated.append(base)
    out = []
    for base in updated:
        for st in simple:
            reads = [
                n
                for n in ast.walk(st)
                if isinstance(n, ast.Subscript)
                and isinstance(n.ctx, ast.Load)
                and isinstance(n.value, (ast.Name, ast.Attribute))
                and ast.unparse(n.value) == base
            ]
            if any(not (_name_set(n.slice) & own) for n in reads):
                out.append(base)
                break
    return out


def _own_indices(loop: ast.For | ast.AsyncFor | ast.While) -> set[str]:
    """The loop variables that differ at every iteration: ``range``'s, ``enumerate``'s count."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return set()
    it = loop.iter
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "reversed":
        it = it.args[0] if it.args else it
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name)):
        return set()
    if it.func.id == "range":
        return _name_set(loop.target)
    if it.func.id == "enumerate" and isinstance(loop.target, ast.Tuple) and loop.target.elts:
        return _name_set(loop.target.elts[0])
    return set()


def _name_set(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _indices(target: ast.AST) -> set[str]:
    """The names inside a target's subscripts (``hs[t]``: ``t``), which it does not store."""
    return {n for s in ast.walk(target) if isinstance(s, ast.Subscript) for n in _name_set(s.slice)}


def _accumulates(st: ast.Assign) -> bool:
    """``x = x + e`` (or ``e + x``), or ``x = [a + b for a, b in zip(x, e)]``: a sum over the
    iterations, not a recurrence."""
    if len(st.targets) != 1 or not isinstance(st.targets[0], ast.Name):
        return False
    x, v = st.targets[0].id, st.value
    if isinstance(v, ast.BinOp) and isinstance(v.op, (ast.Add, ast.Sub)):
        return any(isinstance(o, ast.Name) and o.id == x for o in (v.left, v.right))
    if isinstance(v, ast.ListComp) and isinstance(v.elt, ast.BinOp):
        return isinstance(v.elt.op, ast.Add) and any(x in _name_set(g.iter) for g in v.generators)
    return False


def body_is_step(site: Any) -> bool:
    """Whether the loop's own body is the step: it updates the model, and its first call of
    the script's functions is not itself the step (``train_step(x)``, whose name reads as an
    update). The TF walkthrough's loop calls ``grad`` then ``apply_gradients``; handson-ml's
    calls ``random_batch`` (numpy) first, d2l's ``metric.add``: none of those is the step.
    A body that records the gradients on a tape itself is the step whatever it calls after
    (d2l's linear regression from scratch: its tape, then ``sgd(...)``; told to wrap sgd
    alone in tf.function, 1.95x faster without the profiler, the whole body 4.8-10.8x)."""
    calls = getattr(site, "calls", ())
    if getattr(site, "tape", False):
        return True
    if not getattr(site, "updates", False):
        return False
    return not (calls and UPDATE_WORDS.search(calls[0].lower()))


def _tape(loop: ast.For | ast.AsyncFor | ast.While) -> bool:
    """Whether the loop's own body records gradients on a ``tf.GradientTape``."""
    for n in _direct(loop):
        if isinstance(n, ast.Attribute) and n.attr in ("GradientTape", "gradient"):
            return True
        if isinstance(n, ast.Name) and n.id == "GradientTape":
            return True
    return False


def _updates(loop: ast.For | ast.AsyncFor | ast.While) -> bool:
    for n in _direct(loop):
        name = n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else ""
        if name and UPDATE_WORDS.search(name.lower()) and not _env_step(n):
            return True
        if isinstance(n, ast.AugAssign) and isinstance(n.op, (ast.Add, ast.Sub)):
            values = [v.id for v in ast.walk(n.value) if isinstance(v, ast.Name)]
            if any(GRADIENT_NAMES.search(v) for v in values):
                return True
            if _self_gradient(n):
                return True
        if isinstance(n, ast.Assign) and len(n.targets) == 1:
            # ``W = W - lr * grad``: the target updated from itself and a gradient.
            target = n.targets[0]
            values = [v.id for v in ast.walk(n.value) if isinstance(v, ast.Name)]
            if (
                isinstance(target, ast.Name)
                and target.id in values
                and any(GRADIENT_NAMES.search(v) for v in values if v != target.id)
            ):
                return True
    return False


def _self_gradient(n: ast.AugAssign) -> bool:
    """``w -= lr * X.T @ (X @ w - y)``: a name updated by a product computed from itself (a
    gradient written inline, minibatch SGD's ``w`` carried from batch to batch)."""
    if not isinstance(n.target, ast.Name):
        return False
    reads = any(isinstance(v, ast.Name) and v.id == n.target.id for v in ast.walk(n.value))
    product = any(
        (isinstance(v, ast.BinOp) and isinstance(v.op, ast.MatMult))
        or (isinstance(v, ast.Call) and _call_name(v) in ("dot", "matmul"))
        for v in ast.walk(n.value)
    )
    return reads and product


def _calls(
    loop: ast.For | ast.AsyncFor | ast.While,
    defined: set[str],
    aliases: dict[str, str] | None = None,
) -> tuple[str, ...]:
    """The script's own functions (``defined``) the loop's own body calls, in order; a call
    through a parameter whose default is one of them (``train_fn=train``) counts as that."""
    out: list[str] = []
    for n in sorted(
        (n for n in _direct(loop) if isinstance(n, ast.Call)),
        key=lambda c: (c.lineno, c.col_offset),
    ):
        f = n.func
        name = _call_name(n)
        if isinstance(f, ast.Name) and aliases and name in aliases:
            name = aliases[name]
        if name in defined and name not in out:
            out.append(name)
    return tuple(out)


def _second_forward(loop: ast.For | ast.AsyncFor | ast.While, defined: set[str]) -> tuple[int, str]:
    """(line, name) of a call ``name(...)`` in the loop's own body where ``name`` is also
    passed to one of the script's functions there (``grad(model, x, y)`` beside
    ``model(x, training=True)``): the model run twice on the batch."""
    calls = sorted(
        (n for n in _direct(loop) if isinstance(n, ast.Call)),
        key=lambda c: (c.lineno, c.col_offset),
    )
    passed = [
        {a.id for a in n.args if isinstance(a, ast.Name)} for n in calls if _call_name(n) in defined
    ]
    for n in calls:
        first = n.args[0] if n.args else None
        if not isinstance(n.func, ast.Name) or not isinstance(first, ast.Name):
            continue
        # The model and its input both handed to the same function: the batch run again.
        if any({n.func.id, first.id} <= names for names in passed):
            return n.lineno, n.func.id
    return 0, ""


def _aliases(fn: ast.FunctionDef | ast.AsyncFunctionDef, defined: set[str]) -> dict[str, str]:
    """A function's parameters whose default is one of the script's functions, by name."""
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    pairs = list(
        zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)
    )
    pairs += [
        (a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None
    ]
    return {a.arg: d.id for a, d in pairs if isinstance(d, ast.Name) and d.id in defined}


#: Objects whose ``step`` is an environment's, not a model update (``env.step(action)``: a
#: Keras actor-critic's per-timestep loop was taken as the training loop for it, and the
#: episode's update at the loop's end read "work between passes: run it less often").
ENV_NAMES = re.compile(r"env|game|sim(ulator)?$|world", re.IGNORECASE)


def _env_step(n: ast.AST) -> bool:
    """``env.step`` (of ``env.step(action)``, ``self.env.step(...)``)."""
    if not (isinstance(n, ast.Attribute) and n.attr == "step"):
        return False
    owner = n.value
    name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
    return bool(ENV_NAMES.search(name))


def _names(node: ast.AST) -> list[str]:
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.append(n.id.lower())
        elif isinstance(n, ast.Attribute) and not _env_step(n):
            out.append(n.attr.lower())
        elif isinstance(n, ast.keyword) and n.arg:
            out.append(n.arg.lower())
    return out


def _trains(loop: ast.For | ast.AsyncFor | ast.While) -> bool:
    if any(TRAINING_WORDS.search(n) for n in _names(loop)):
        return True
    if isinstance(loop, ast.While):
        return any(ITER_WORDS.search(n) or TARGET_WORDS.search(n) for n in _names(loop.test))
    return any(TARGET_WORDS.search(n) for n in _names(loop.target)) or any(
        ITER_WORDS.search(n) for n in _names(loop.iter)
    )


#: Keras's training calls: a script making one has its steps from the fit detector.
FIT_CALLS = frozenset({"fit", "fit_generator", "train_on_batch"})


def calls_fit(src: Source) -> bool:
    """Whether the script calls Keras's ``fit`` (or ``fit_generator``, ``train_on_batch``)
    anywhere: its steps are fit's batches, not a loop's iterations, unless a loop of its own
    updates the model or names training."""
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in FIT_CALLS
        for n in ast.walk(src.tree)
    )


def mark_loops(src: Source, first: int = 0, file: str = "") -> list[LoopSite]:
    """Put ``__profiler_loop__(k)`` first in every loop's body and ``__profiler_loop_end__(k)``
    after the loop: each iteration announces itself, and the script process picks the loop
    whose iterations are the steps (``profiler.capture.script.detect.LoopMarks``). A module
    of the script's folder is marked with its loops numbered from ``first`` and ``file``, its
    name, on each."""
    sites: list[LoopSite] = []
    over_params: set[int] = set()
    defined = {
        n.name for n in ast.walk(src.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    periodic_fns = periodic_functions(src.tree)

    def mark(
        stmts: list[ast.stmt],
        depth: int,
        function: str,
        aliases: dict[str, str] | None = None,
        periodic: bool = False,
        made: tuple[frozenset[str], int] = (frozenset(), 0),
    ) -> None:
        i = 0
        while i < len(stmts):
            stmt = stmts[i]
            inner_depth, inner_function, inner_aliases = depth, function, aliases
            inner_periodic = periodic
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner_depth, inner_function = 0, stmt.name
                inner_aliases = _aliases(stmt, defined)
                inner_periodic = stmt.name in periodic_fns
            elif isinstance(stmt, ast.ClassDef):
                inner_depth, inner_function = 0, function
            elif isinstance(stmt, ast.If) and depth > 0 and _modulo(stmt.test):
                inner_periodic = True
            if isinstance(stmt, _LOOPS):
                k = first + len(sites)
                kind = "while" if isinstance(stmt, ast.While) else "for"
                sites.append(
                    LoopSite(
                        k,
                        stmt.lineno,
                        depth,
                        kind,
                        function,
                        _trains(stmt),
                        _updates(stmt),
                        _calls(stmt, defined, aliases),
                        stmt.end_lineno or stmt.lineno,
                        carried(stmt),
                        periodic,
                        tape=_tape(stmt),
                        fresh_metrics=_fresh(stmt, made),
                        second_forward=_second_forward(stmt, defined),
                        file=file,
                    )
                )
                if isinstance(stmt, ast.For) and any(
                    PARAM_ITER.search(n) for n in _names(stmt.iter)
                ):
                    over_params.add(k - first)
                for inner in _statement_lists(stmt):
                    mark(inner, depth + 1, function, aliases, periodic, _metrics_made(stmt))
                stmt.body.insert(0, _guarded(_loop_call(LOOP_MARK, k, stmt), k, stmt))
                if _returns_from(stmt):
                    # A loop its function returns from (a softmax layer's backprop returning
                    # at its label's gradient) ends there too: its end is marked in a
                    # ``finally``, else its iteration was timed from that return to the next
                    # call's loop, the whole step of a CNN, and the loop chosen as the steps.
                    guarded = ast.Try(
                        body=[stmt],
                        handlers=[],
                        orelse=[],
                        finalbody=[_loop_call(LOOP_END, k, stmt)],
                    )
                    stmts[i] = ast.copy_location(guarded, stmt)
                    i += 1
                    continue
                stmts.insert(i + 1, _loop_call(LOOP_END, k, stmt))
                i += 2
                continue
            inner_made = made if inner_function == function else (frozenset(), 0)
            for inner in _statement_lists(stmt):
                mark(inner, inner_depth, inner_function, inner_aliases, inner_periodic, inner_made)
            i += 1

    graph = _call_graph(src.tree, defined)
    mark(src.tree.body, 0, "<module>")
    sites = _updates_of_parameter_loops(sites, over_params)
    updating = {s.function for s in sites if s.updates}
    return [
        replace(s, drives=True)
        if not s.updates and s.calls and _reaches(graph, s.calls, updating)
        else s
        for s in sites
    ]


def _call_name(call: ast.Call) -> str:
    """The name a call calls: ``f`` of ``f(...)`` and of ``obj.f(...)``, else ""."""
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _call_graph(tree: ast.Module, defined: set[str]) -> dict[str, set[str]]:
    """Each of the script's functions (by name: methods of the same name merged) and the
    script's functions it calls."""
    graph: dict[str, set[str]] = {}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            called = graph.setdefault(fn.name, set())
            for n in ast.walk(fn):
                if isinstance(n, ast.Call) and _call_name(n) in defined:
                    called.add(_call_name(n))
    return graph


def _reaches(graph: dict[str, set[str]], start: tuple[str, ...], targets: set[str]) -> bool:
    """Whether a call chain from ``start`` reaches a function in ``targets``."""
    seen: set[str] = set()
    todo = list(start)
    while todo:
        name = todo.pop()
        if name in targets:
            return True
        if name not in seen:
            seen.add(name)
            todo.extend(graph.get(name, ()))
    return False


#: What a loop over the model's parameters iterates (``for p in self.params``, ``for w, g in
#: zip(weights, grads)``, ``for layer in layers``, a dict of arrays named ``model``: Karpathy's
#: pg-pong, ``for k, v in model.items()``, whose episode loop was no candidate and the whole
#: run one step).
PARAM_ITER = re.compile(r"param|weight|layer|grad|variable|theta|^model$")


def _updates_of_parameter_loops(sites: list[LoopSite], over_params: set[int]) -> list[LoopSite]:
    """A loop over the parameters that updates each (``for p in self.params: self.params[p] -=
    lr * grads[p]``) inside another loop: the loop around it updates the model at each of its
    iterations and is the steps' candidate, not the parameter loop (cs231n's TwoLayerNet.train:
    the parameter loop, 4 iterations of 0.3 ms in a 17 ms iteration, never held 30% of the
    time, and the whole run became one step)."""
    out = list(sites)
    for k in sorted(over_params):
        s = out[k]
        if not s.updates or s.depth == 0:
            continue
        around = [
            o
            for o in out
            if o.function == s.function and o.depth == s.depth - 1 and o.line < s.line <= o.end_line
        ]
        if around:
            parent = around[-1]
            out[next(i for i, o in enumerate(out) if o is parent)] = replace(parent, updates=True)
            out[k] = replace(s, updates=False)
    return out


def _modulo(test: ast.expr) -> bool:
    """Whether an ``if``'s test takes a remainder (``n % 100 == 0``: once in a while)."""
    return any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in ast.walk(test))


def periodic_functions(tree: ast.Module) -> set[str]:
    """The script's functions called only once in a while from a loop: every call of theirs
    sits under an ``if`` with a modulo inside a loop (min-char-rnn's gradient check, its
    loop's iterations calling the loss 100 times: taken as the steps, they were "one step in
    every 50" of the training it interrupts)."""
    calls: dict[str, list[bool]] = {}

    def visit(node: ast.AST, in_loop: bool, under_mod: bool) -> None:
        for child in ast.iter_child_nodes(node):
            loop, mod = in_loop, under_mod
            if isinstance(child, _FUNCTIONS):
                loop, mod = False, False
            elif isinstance(child, _LOOPS):
                loop, mod = True, under_mod
            elif isinstance(child, ast.If) and in_loop and _modulo(child.test):
                visit(child.test, loop, mod)
                for part in (child.body, child.orelse):
                    for st in part:
                        visit_stmt(st, loop, part is child.body or mod)
                continue
            if isinstance(child, ast.Call) and (name := _call_name(child)):
                calls.setdefault(name, []).append(in_loop and under_mod)
            visit(child, loop, mod)

    def visit_stmt(st: ast.stmt, in_loop: bool, under_mod: bool) -> None:
        wrapper = ast.Module(body=[st], type_ignores=[])
        visit(wrapper, in_loop, under_mod)

    visit(tree, False, False)
    return {name for name, how in calls.items() if how and all(how)}


def _returns_from(loop: ast.stmt) -> bool:
    """Whether a ``return`` in the loop's body (not in a function defined there) leaves it."""
    todo: list[ast.AST] = [loop]
    while todo:
        node = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Return):
                return True
            if not isinstance(child, (*_FUNCTIONS, ast.ClassDef)):
                todo.append(child)
    return False


def _guarded(call: ast.stmt, k: int, at: ast.AST) -> ast.stmt:
    """``if __profiler_loop_on__[k]: call``."""
    test = ast.Subscript(
        value=ast.Name(id=LOOP_ON, ctx=ast.Load()), slice=ast.Constant(value=k), ctx=ast.Load()
    )
    return ast.copy_location(ast.If(test=test, body=[call], orelse=[]), at)


def _loop_call(name: str, k: int, at: ast.AST) -> ast.stmt:
    call = ast.Call(
        func=ast.Name(id=name, ctx=ast.Load()), args=[ast.Constant(value=k)], keywords=[]
    )
    return ast.copy_location(ast.Expr(value=ast.copy_location(call, at)), at)
