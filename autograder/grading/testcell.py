"""Run one test cell in the grader, against the student's objects in the sandbox.

The cell's source is the instructor's (nbgrader restored it from the gradebook, hidden tests
included).  It runs here, in a namespace of its own: every name it reads but does not define
(``BatchNorm2d``, ``batch_mean_var``) becomes a :class:`~autograder.core.side.StudentName` on the
sandbox's side, so ``checks.check_training_forward(BatchNorm1d, BatchNorm2d, full=True)`` drives
the student's classes over the socket and compares the plain data it gets back with torch here.
The student's process never sees the cell's text, and nothing it sends can be more than data.
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import io

import nbformat

from autograder.core.messages import CheckFailed
from autograder.core.side import Side, StudentCodeFailed, StudentName


def free_names(source: str) -> list[str]:
    """Names the cell reads before (or without) binding them itself, builtins excepted."""
    tree = ast.parse(source)
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
    read = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    return sorted({n for n in read if n not in bound and not hasattr(builtins, n)})


def run(source: str, side: Side) -> list:
    """The outputs the cell produces: what it printed and, if a check failed, an error."""
    printed = io.StringIO()

    def cell_print(*args, sep=" ", end="\n", file=None, flush=False):
        printed.write(sep.join(str(a) for a in args) + end)

    namespace = {"__name__": "__grader__", "__builtins__": builtins, "print": cell_print}
    namespace.update({name: StudentName(side, name) for name in free_names(source)})
    error = None
    try:
        tampered = side.tampered()
        if tampered:
            shown = ", ".join(tampered[:5]) + (" ..." if len(tampered) > 5 else "")
            raise CheckFailed(
                f"The notebook has replaced {shown}. Checks do not credit a notebook that modifies "
                "torch, numpy or autograder: this part earns no points."
            )
        with contextlib.redirect_stdout(printed):  # what the checks print (notes) joins the cell's output
            exec(compile(source, "<test cell>", "exec"), namespace)  # the instructor's code
    except CheckFailed as failure:
        error = ("CheckFailed", str(failure))
    except StudentCodeFailed as failure:
        error = ("StudentCodeFailed", f"The notebook's code could not be checked: {failure}")
    except Exception as failure:  # noqa: BLE001 - whatever went wrong, the cell earns nothing
        error = (type(failure).__name__, f"The check could not finish ({type(failure).__name__}: {failure}).")
    outputs = []
    if printed.getvalue():
        outputs.append(nbformat.v4.new_output("stream", name="stdout", text=printed.getvalue()))
    if error is not None:
        outputs.append(_error(*error))
    return outputs


def _error(name: str, message: str):
    return nbformat.v4.new_output("error", ename=name, evalue=message, traceback=[f"{name}: {message}"])


def error_outputs(reason: str) -> list:
    """The outputs of a test cell that could not be checked at all."""
    return [_error("StudentCodeFailed", f"The notebook's code could not be checked: {reason}.")]
