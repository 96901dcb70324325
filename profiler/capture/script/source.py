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
from dataclasses import dataclass
from pathlib import Path

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
    try:
        tree = ast.parse(data, filename=str(path))
        # Some errors (``return`` outside a function, bad ``nonlocal``) appear only on compile.
        compile(tree, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f" (line {exc.lineno})" if exc.lineno else ""
        raise ScriptError(f"{path} is not a Python script: {exc.msg}{where}") from None
    except (ValueError, UnicodeError) as exc:
        raise ScriptError(f"{path} is not a Python script: {exc}") from None
    return Source(path, tree)


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
