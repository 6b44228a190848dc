"""Find routes around the op recorder in a submission's source, for the instructor to review.

Whether a student's layer uses torch's own normalization is observed where the student's code
runs (:class:`autograder.sandbox.observe.OpRecorder`), and code there can hide from it: a
decomposition from ``torch._decomp`` or ``torch._refs`` computes batch norm from primitive ops,
``_disable_current_modes`` switches the recorder off, work on another thread or process is not
recorded, ``ctypes`` reaches native code, and a ``torch.ops`` name assembled at run time escapes
a reader.  None of these is needed to solve an exercise, so finding one in the source is worth a
look: the grade stands, and the report lists the submission as needing review.

This is a reader's aid, not a proof: source can always be obfuscated further (``exec`` of
decoded strings is itself flagged).
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass

import nbformat

# (pattern, what it is) -- searched in the code of the cells the student wrote, with comments,
# docstrings and string literals left out (a docstring may well mention torch.nn.BatchNorm2d).
ROUTES = [
    (r"torch\s*\.\s*_decomp|torch\s*\.\s*_refs|torch\s*\.\s*_prims",
     "torch's decompositions (torch._decomp / torch._refs) compute normalization out of sight of the recorder"),
    (r"_python_dispatch|_disable_current_modes|dispatch_mode|TorchDispatchMode|TorchFunctionMode|__torch_dispatch__|__torch_function__",
     "dispatch or function modes (can switch the op recorder off or lie about tensors)"),
    (r"\b_?thread(ing)?\b|\bThread\s*\(|concurrent\s*\.\s*futures|\bmultiprocessing\b|\bsubprocess\b|os\s*\.\s*(fork|system|exec|spawn)",
     "threads or processes (work there is not recorded)"),
    (r"sys\s*\.\s*(setprofile|settrace)|\bsetprofile\b|\bsettrace\b",
     "profiler or tracer hooks (can switch off what watches the student's calls)"),
    (r"torch\s*\.\s*func\b|\bfrom\s+torch\s+import\s+[^#]*\bfunc\b|forward_ad|autograd\s*\.\s*functional|\bfuse_(conv|linear)_bn|"
     r"\bswa_utils\b|\bupdate_bn\b",
     "derivative transforms (torch.func, forward-mode AD, autograd.functional) or torch's BN fusion and recalibration helpers"),
    (r"\bctypes\b|\bcffi\b|load_inline|cpp_extension",
     "native code (ctypes, C++ extensions)"),
    (r"torch\s*\.\s*ops\b|torch\s*\.\s*_C\b|torch\s*\.\s*_ops\b",
     "torch.ops or torch._C reached directly (a name built at run time escapes this scan)"),
    (r"(?<![.\w])(exec|eval|compile)\s*\(|__import__|\bimportlib\b|\bbase64\b|\bcodecs\b|\bmarshal\b|\bpickle\b",
     "code built or loaded at run time (exec, eval, imports by name, decoding)"),
    (r"sys\s*\.\s*_getframe|\binspect\b|\bgc\b\s*\.|__globals__|__code__|__closure__|f_back|f_locals",
     "introspection of frames, globals or code objects"),
    (r"\bautograder\b|sys\s*\.\s*modules|\bbuiltins\b|__builtins__|__subclasses__|\bglobals\s*\(|"
     r"\bchecks\b(?!\s*\.\s*check_\w+\s*\()",
     "the grader's own modules (or the interpreter's module table) used from student code"),
    (r"(?<![\w])(native_)?(batch|layer|group|instance|rms)_norm\b|"
     r"\bRMSNorm\b|\bmodules\s*\.\s*(batchnorm|normalization|instancenorm)\b|_check_input_dim\s*=|\.\s*forward\s*$",
     "torch's normalization functions or its layers' internals used directly"),
    (r"\btorch\s*\.\s*(\w+\s*\.\s*)*_\w+|\bfrom\s+torch(\.\w+)*\s+import\s+[^#]*\b_\w+|\bfrom\s+torch(\.\w+)*\._\w+|"
     r"no_dispatch|_DisableTorchDispatch|_DisablePython|_ExcludeDispatchKeyGuard",
     "torch's private modules or switches (torch._C, torch.utils._mode_utils, ...)"),
]
# String literals (not docstrings) that name these routes: getattr(torch.ops.aten, "native_" + ...).
STRING_ROUTE = re.compile(r"autograder|_decomp|_refs|native_|aten\b|(batch|layer|group|instance|rms)_norm\b|sandbox|integrity")

@dataclass(frozen=True)
class Finding:
    cell: int  # index of the code cell in the notebook
    line: str  # the line, shortened
    what: str

    def describe(self) -> str:
        return f"cell {self.cell}: {self.what}: `{self.line}`"


def _student_cells(nb, given: set[str] | None = None) -> list[tuple[int, str]]:
    """Code cells the student wrote: every code cell whose source is not one of the ``given``
    sources (the release's locked cells). Without ``given``, the cells not locked in the notebook's
    own metadata (which a student can change: use ``given`` when grading)."""
    cells = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if given is not None:
            if cell.source.strip() in given:
                continue
        else:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("locked") and not meta.get("solution"):
                continue
        cells.append((index, cell.source))
    return cells


def _code_and_strings(source: str) -> tuple[list[str], list[str]]:
    """The cell's lines without comments and string literals, and its string literals that are
    not docstrings. A cell that does not parse (IPython syntax) is read line by line, as is."""
    try:
        tree = ast.parse(source)
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (SyntaxError, tokenize.TokenError, ValueError):
        return [line for line in source.splitlines() if not line.lstrip().startswith("#")], []
    docstrings = {id(node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)}
    strings = [node.value for node in ast.walk(tree)
               if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]
    lines = source.splitlines()
    code = [list(line) for line in lines]
    for token in tokens:
        if token.type in (tokenize.STRING, tokenize.COMMENT):
            (r0, c0), (r1, c1) = token.start, token.end
            for row in range(r0, r1 + 1):
                start = c0 if row == r0 else 0
                stop = c1 if row == r1 else len(code[row - 1])
                code[row - 1][start:stop] = " " * (stop - start)
    return ["".join(chars) for chars in code], strings


def scan_source(cells: list[tuple[int, str]]) -> list[Finding]:
    """Every route the given code cells take, once per route and cell, with the line it is on."""
    found = []
    for index, source in cells:
        code, strings = _code_and_strings(source)
        shown = source.splitlines()
        for pattern, what in ROUTES:
            for number, line in enumerate(code):
                if re.search(pattern, line):
                    original = shown[number] if number < len(shown) else line
                    found.append(Finding(index, original.strip()[:100], what))
                    break
        named = [s for s in strings if STRING_ROUTE.search(s)]
        if named:
            found.append(Finding(index, repr(named[0])[:100], "a string naming torch's or the grader's internals"))
    return found


def scan_notebook(path, given: set[str] | None = None) -> list[Finding]:
    """Findings in the student's cells of a submitted notebook (nothing for an unreadable one);
    ``given``: the stripped sources of the release's locked cells."""
    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception:  # noqa: BLE001 - the report says elsewhere that it is unreadable
        return []
    return scan_source(_student_cells(nb, given))
