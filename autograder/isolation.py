"""Grade test cells where the student's code cannot reach the checks.

Any guard that runs in the student's kernel can be undone by code in that kernel: a solution
cell may rebind ``torch.allclose``, ``torch.testing.assert_close`` or a function of this
package, and a test cell that calls it then passes.  So after nbgrader has executed a notebook,
:class:`RecheckInCleanProcess` runs it once more in a child process that

1. starts from the nbgrader process (which never ran student code), with every module of this
   package imported and the trusted state of torch, numpy, the builtins and this package
   remembered (:mod:`autograder.integrity`);
2. runs the notebook's code cells in order, the test cells with the source nbgrader restored
   from the gradebook;
3. before each test cell, checks that the cells so far changed nothing trusted; once anything
   changed (``torch.allclose`` rebound, a grader function made a no-op, a code object swapped)
   that test cell and every later one fail, and the trusted objects are put back either way;
4. records whether each test cell raised.

A test cell earns its points only if it passed in the kernel *and* here.  The child's output is
discarded, each cell has a time limit, and a child that dies or hangs fails the cells it did
not finish.
"""
from __future__ import annotations

import builtins
import importlib
import multiprocessing
import os
import pkgutil
import signal
import sys
import time
import types

import nbformat
from nbgrader import utils
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Integer

import autograder

_PREFIX = "RecheckFailed"


def _is_test_cell(cell) -> bool:
    return cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell)


def _has_error(cell) -> bool:
    return any(o.get("output_type") == "error" for o in cell.get("outputs", []))


class RecheckInCleanProcess(NbGraderPreprocessor):
    """After ``Execute``: fail every test cell that does not also pass in a clean process."""

    enabled = Bool(True, help="Re-run passed test cells in a clean process.").tag(config=True)
    timeout = Integer(300, help="Seconds for the whole re-check of one notebook.").tag(config=True)
    cell_timeout = Integer(120, help="Seconds for one cell in the re-check.").tag(config=True)

    def preprocess(self, nb, resources):
        cells = [
            (i, "test" if _is_test_cell(c) else "code", c.source)
            for i, c in enumerate(nb.cells)
            if c.cell_type == "code"
        ]
        if not any(kind == "test" and not _has_error(nb.cells[i]) for i, kind, _ in cells):
            return nb, resources
        path = resources.get("metadata", {}).get("path") or os.getcwd()
        verdicts, problem = recheck(cells, path, self.timeout, self.cell_timeout)
        for index, kind, _ in cells:
            cell = nb.cells[index]
            if kind != "test" or _has_error(cell):
                continue
            if index not in verdicts:
                message = f"this test could not be re-checked in a clean process ({problem})."
            elif verdicts[index] is None:
                continue
            else:
                message = (
                    "this test passed in the notebook's kernel but fails when re-run in a clean "
                    "process, where changes made to torch, numpy or autograder have no effect: "
                    + verdicts[index]
                )
            self.log.warning("Cell %s: %s", cell.metadata.get("nbgrader", {}).get("grade_id"), message)
            cell.outputs.append(
                nbformat.v4.new_output("error", ename=_PREFIX, evalue=message, traceback=[f"{_PREFIX}: {message}"])
            )
        return nb, resources


def recheck(cells, path: str, timeout: float, cell_timeout: float = 120) -> tuple[dict, str]:
    """Run ``cells`` in a child process; return ``{test cell index: None or message}``.

    A missing index means the child did not get to that cell; the second value says why.
    Cells after the last test cell cannot change a verdict and are not run.
    """
    last_test = max((n for n, (_, kind, _) in enumerate(cells) if kind == "test"), default=-1)
    cells = cells[: last_test + 1]
    import torch

    method = "spawn" if torch.cuda.is_initialized() else "fork"  # CUDA does not survive fork
    context = multiprocessing.get_context(method)
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_child_main, args=(cells, path, sender, cell_timeout), daemon=True)
    child.start()
    sender.close()
    verdicts: dict[int, str | None] = {}
    problem = "the re-check ended early"
    deadline = time.monotonic() + timeout
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not receiver.poll(remaining):
                problem = f"it took longer than {timeout} s"
                break
            try:
                item = receiver.recv()
            except EOFError:
                problem = "the clean process died (did the notebook call os._exit or run out of memory?)"
                break
            if item is None:
                problem = ""
                break
            index, message = item
            verdicts[int(index)] = None if message is None else str(message)
    finally:
        if child.is_alive():
            child.kill()
        child.join(5)
        receiver.close()
    return verdicts, problem


class _NoShell:
    """Stands in for ``get_ipython()``: magics and shell escapes do nothing here."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


class _CellTimeout(BaseException):
    pass


def _load_grader() -> None:
    """Import every module of this package, so all of it is in the trusted baseline."""
    for info in pkgutil.iter_modules(autograder.__path__, "autograder."):
        importlib.import_module(info.name)
    autograder.integrity.remember()


def _child_main(cells, path, sender, cell_timeout) -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the child
    os.environ["MPLBACKEND"] = "Agg"
    from IPython.core.inputtransformer2 import TransformerManager

    _load_grader()
    changed, restore = autograder.integrity.guard()  # held before any student code runs
    send = sender.send
    os.chdir(path)
    sys.path.insert(0, path)
    main = types.ModuleType("__main__")
    main.__dict__.update({"__builtins__": builtins, "get_ipython": _NoShell, "display": print})
    sys.modules["__main__"] = main
    transformer = TransformerManager()

    def on_alarm(signum, frame):
        raise _CellTimeout(f"cell took longer than {cell_timeout} s")

    signal.signal(signal.SIGALRM, on_alarm)
    tampered: list[str] = []
    for index, kind, source in cells:
        if kind == "test":
            tampered = tampered or changed()
            restore()
            if tampered:
                send((index, f"the notebook replaced {', '.join(tampered[:5])}; nothing is credited after that."))
                continue
        message = None
        signal.alarm(int(cell_timeout))
        try:
            exec(compile(transformer.transform_cell(source), f"<cell {index}>", "exec"), main.__dict__)
        except BaseException as error:  # noqa: BLE001 - SystemExit and timeouts included
            message = f"{type(error).__name__}: {error}"
        finally:
            signal.alarm(0)
        if kind == "test":
            send((index, message))
    send(None)
    sender.close()
