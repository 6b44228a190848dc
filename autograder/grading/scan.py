"""Find routes around the op recorder in a submission's source, for the instructor to review.

Whether a student's layer uses torch's own normalization is observed where the student's code
runs (:class:`autograder.sandbox.observe.OpRecorder`), and code there can hide from it: a
decomposition from ``torch._decomp`` or ``torch._refs`` computes batch norm from primitive ops,
``_disable_current_modes`` switches the recorder off, work on another thread or process is not
recorded, ``ctypes`` reaches native code, and a ``torch.ops`` name assembled at run time escapes
a reader.  None of these is needed to solve an exercise, so finding one in the source is worth a
look: the grade stands, and the report lists the submission as needing review.

The scan reads each cell's syntax tree, never its text with regular expressions: the dotted names
a cell uses (``torch.utils._python_dispatch``, with the aliases the notebook binds resolved),
its imports, its calls and its literals, each checked with plain name and substring tests, so
the time it takes grows with the cell's length and nothing more.  Code built at run time
(``exec``, ``eval``, decoding, names computed for ``getattr`` or an import, long opaque literals)
is reported as such, since what it runs cannot be read.  A cell too long to scan, or one that is
not Python even without IPython's own syntax, is itself reported.  This is a reader's aid, not a
proof: source can always be obfuscated further.
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path
import warnings
from dataclasses import dataclass

import nbformat

import autograder

MAX_CELL_CHARS = 100_000  # far above any answer of the course; a longer cell is worth a look itself
MAX_LINE_CHARS = 10_000
MAX_NOTEBOOK_CHARS = 250_000  # every cell scanned, together
MIN_CELL_COST = 100  # what each cell, even an empty one, counts towards that budget
OPAQUE_CHARS = 200  # a literal with more characters of hex or base64 than this hides what it holds
SHOWN_CHARS = 100
MAX_PARTS = 24  # parts of a dotted name that are checked (a longer chain keeps its first and last 12)

TOO_LONG = "too long to scan; look at it"
NOTEBOOK_TOO_LONG = "this cell and the ones after it are too much to scan; look at them"
UNPARSED = "does not parse as Python; look at it"
MAGIC = "IPython magics or shell commands (what they run is not read by this scan)"
RUN_TIME = "code built or loaded at run time"
STRING = "a string naming torch's or the grader's internals"
COMPUTED_NAME = f"{RUN_TIME}: getattr, setattr or delattr with a name computed at run time"
NAMESPACE = f"{RUN_TIME}: globals(), vars(), locals() or __dict__ indexed by name"
OPAQUE = f"{RUN_TIME}: a long opaque literal (hex, base64 or bytes)"


@dataclass(frozen=True)
class Route:
    """A kind of route, and the dotted names that take it.

    ``spec``: space-separated patterns over a dotted name's parts. ``name`` is one part,
    ``name*`` a part that starts so, ``*name*`` a part that contains it, ``a.b`` parts that follow
    each other (``a.b*``: and the last starts so), ``=name`` the whole name. ``qualified``: only
    names reached through a module or an object (``fn.batch_norm``, not a student's ``batch_norm``).
    """

    what: str
    spec: str = ""
    qualified: bool = False


NORMALIZATION = "torch's normalization functions or its layers' internals used directly"
PRIVATE = "torch's private modules or switches (torch._C, torch.utils._mode_utils, ...)"
GRADER = "the grader's own modules (or the interpreter's module table) used from student code"
NORM_FUNCTIONS = ("batch_norm* layer_norm group_norm instance_norm rms_norm "
                  "native_batch_norm* native_layer_norm* native_group_norm*")

# In the order the report lists them; every name a cell uses is checked against each.
ROUTES = [
    Route("torch's decompositions (torch._decomp / torch._refs) compute normalization out of sight of the recorder",
          "_decomp* _refs _prims*"),
    Route("dispatch or function modes (can switch the op recorder off or lie about tensors)",
          "_python_dispatch _disable_current_modes _push_mode _pop_mode* TorchDispatchMode TorchFunctionMode "
          "*dispatch_mode* *function_mode* *torch_dispatch* *torch_function* torch.overrides"),
    Route("threads or processes (work there is not recorded)",
          "thread _thread threading Thread* concurrent multiprocessing subprocess asyncio pty fork* "
          "os.system os.popen os.exec* os.spawn* os.posix_spawn*"),
    Route("profiler or tracer hooks (can switch off what watches the student's calls)",
          "setprofile* settrace* addaudithook sys.monitoring"),
    Route("derivative transforms (torch.func, forward-mode AD, autograd.functional) or torch's BN fusion and recalibration helpers",
          "torch.func torch.vmap functorch forward_ad autograd.functional "
          "fuse_conv_bn* fuse_linear_bn* fusion swa_utils update_bn"),
    Route("native code (ctypes, C++ extensions)", "ctypes _ctypes cffi load_inline cpp_extension load_library"),
    Route("torch.ops or torch._C reached directly (a name built at run time escapes this scan)",
          "torch.ops torch._C torch._ops torch.library"),
    Route(f"{RUN_TIME}: exec, eval or compile",
          "=exec =eval =compile =execfile builtins.exec builtins.eval builtins.compile "
          "__builtins__.exec __builtins__.eval __builtins__.compile"),
    Route(f"{RUN_TIME}: IPython's shell (get_ipython) runs code",
          "get_ipython run_cell run_line_magic run_cell_magic run_code safe_execfile safe_run_module user_ns ex ev"),
    Route(f"{RUN_TIME}: bytes decoded from hex", "fromhex unhexlify a2b_hex b16decode"),
    Route(f"{RUN_TIME}: decoding or unpickling (base64, binascii, codecs, zlib, marshal, pickle)",
          "base64 binascii codecs zlib lzma bz2 marshal pickle"),
    Route(f"{RUN_TIME}: imports by name (importlib, __import__)", "importlib __import__ imp runpy zipimport pkgutil"),
    Route(COMPUTED_NAME, "__getattribute__ attrgetter methodcaller"),
    Route(f"{RUN_TIME}: code generated by torch.compile or TorchScript", "torch.compile torch.jit torch.fx torch.export"),
    Route(f"{RUN_TIME}: code objects built by hand", "CodeType"),
    Route(NAMESPACE, ""),  # these two are found by how names are used, not by which
    Route(OPAQUE, ""),
    Route("introspection of frames, globals or code objects",
          "_getframe _current_frames inspect currentframe __globals__ __code__ __closure__ f_back f_locals "
          "f_globals f_code f_builtins tb_frame gi_frame cr_frame gc.get* gc.callbacks gc.garbage"),
    Route(GRADER, "sys.modules sys.meta_path sys.path_hooks builtins __builtins__ __subclasses__"),
    Route(NORMALIZATION, f"{NORM_FUNCTIONS} RMSNorm modules.batchnorm modules.normalization modules.instancenorm",
          qualified=True),
    Route(PRIVATE, "no_dispatch _DisableTorchDispatch _DisablePython _ExcludeDispatchKeyGuard DisableTorchFunction*"),
]
ORDER = {route.what: rank for rank, route in enumerate(ROUTES)}


def _index(routes: list[Route]) -> dict:
    """The routes' patterns by kind, each with its route: what every name is checked against."""
    index = {"part": {}, "whole": {}, "prefix": [], "inside": [], "sequence": []}
    for route in routes:
        for pattern in route.spec.split():
            if pattern.startswith("="):
                index["whole"].setdefault(pattern[1:], []).append(route)
            elif pattern.startswith("*"):
                index["inside"].append((pattern.strip("*"), route))
            elif "." in pattern:
                needle = f".{pattern[:-1]}" if pattern.endswith("*") else f".{pattern}."
                index["sequence"].append((needle, route))
            elif pattern.endswith("*"):
                index["prefix"].append((pattern[:-1], route))
            else:
                index["part"].setdefault(pattern, []).append(route)
    index["any prefix"] = tuple(prefix for prefix, _ in index["prefix"])
    return index


INDEX = _index(ROUTES)

# Names the course's locked cells bind, which student cells use without binding them again.
GIVEN_NAMES = {"nn": ("torch", "nn"), "dist": ("torch", "distributed"),
               "checks": ("autograder", "checks"), "questions": ("autograder", "core", "questions")}
# What of the grader a student may use, as the course's given cells do: the package's public
# names, each exercise's checks module and its check functions (``checks.check_...(...)``), the
# questions.  ("autograder", "checks") stands for the chapter's module the given cells bind.
EXERCISE_FOLDERS = sorted(path.name for path in (Path(autograder.__file__).parent / "exercises").iterdir()
                          if path.is_dir() and path.name.startswith("ex"))
CHECK_MODULES = ({("autograder", "exercises", folder, "checks") for folder in EXERCISE_FOLDERS}
                 | {("autograder", "checks"), ("autograder", "core", "questions")})
SIGLIP_REFERENCE = ("autograder", "exercises", "ex03_layer_norm", "siglip_reference")
PUBLIC_NAMES = {("autograder", "CheckFailed"), ("autograder", "available_devices"), ("autograder", "default_device"),
                (*SIGLIP_REFERENCE, "SiglipVisionConfig")}
# Names of a chapter's module that a given cell uses besides its checks (exercise 06's sweep cell,
# which a student may restyle): ``checks.ghost_sweep(GhostBatchNorm)``.
CHAPTER_NAMES = {"ghost_sweep", "sweep_table", "SWEEP_SCALES", "SWEEP_VIRTUAL_BATCH_SIZES"}
PACKAGES = ({("autograder",), ("autograder", "core"), ("autograder", "exercises")}
            | {("autograder", "exercises", folder) for folder in EXERCISE_FOLDERS})  # ``from <package> import checks``
IMPORTABLE = PACKAGES | {SIGLIP_REFERENCE} | CHECK_MODULES | PUBLIC_NAMES
# Where the classes are that torch's own idiom tests for: isinstance(m, nn.modules.batchnorm._BatchNorm).
NORM_MODULES = {(*nn, "modules", module) for nn in (("nn",), ("torch", "nn"))
                for module in ("batchnorm", "instancenorm", "normalization")}

STRING_PARTS = ("autograder", "_decomp", "_refs", "_prims", "native_", "sandbox", "integrity",
                "_python_dispatch", "no_dispatch", "_mode_utils")
STRING_WORDS = {"aten", "_C", "_ops", "batch_norm", "layer_norm", "group_norm", "instance_norm", "rms_norm"}
WORD = re.compile(r"\w+")
NOT_ENCODED = re.compile(r"[^A-Za-z0-9+/=_\\-]+")  # what breaks a run of hex or base64

SAFE_MAGICS = {"time", "timeit", "capture", "matplotlib", "who", "whos"}
PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError)
MAX_BINDINGS = 4  # aliases kept per name
MAX_RESOLUTIONS = 4  # names a dotted name is read as, through aliases


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


# --- reading a cell ------------------------------------------------------------------------------

def _lines(source: str) -> list[str]:
    """The cell's lines, numbered as Python numbers them (``\\r`` ends a line too)."""
    return source.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _shorten(line: str) -> str:
    return line.strip()[:SHOWN_CHARS]


def _without_ipython(lines: list[str]) -> tuple[str, list[str]]:
    """The cell with IPython's own syntax made plain Python (a timed statement stays, other
    magics, shell escapes and help requests become ``pass``), and the lines whose magic or shell
    command runs what this scan does not read."""
    plain, unread = [], []
    for line in lines:
        body = line.lstrip()
        indent = line[:len(line) - len(body)]
        target, equals, value = body.partition("=")
        if equals and target.strip().isidentifier() and value.lstrip().startswith(("%", "!")):
            body = value.lstrip()  # x = !ls, t = %timeit -o f()
        if body.startswith(("%", "!")):
            name, args = (body.lstrip("%").split(None, 1) + ["", ""])[:2]
            if name not in SAFE_MAGICS:
                unread.append(line)
            statement = _timed_statement(args) if name in ("time", "timeit") and not body.startswith("%%") else "pass"
            plain.append(indent + statement)
        elif body.startswith("?") or (body.endswith("?") and not body.startswith("#")):
            plain.append(indent + "pass")  # help: runs nothing
        else:
            plain.append(line)
    while plain and not plain[-1].strip():
        plain.pop()
    if plain and plain[-1].rstrip().endswith(":"):  # a cell that ends with an open block
        plain.append(plain[-1][:len(plain[-1]) - len(plain[-1].lstrip())] + "    pass")
    return "\n".join(plain), unread


def _timed_statement(args: str) -> str:
    """The statement of ``%time`` or ``%timeit``, without the magic's options."""
    rest = args.strip()
    while rest.startswith("-"):
        option, _, rest = rest.partition(" ")
        if option in ("-n", "-r", "-p"):
            _, _, rest = rest.lstrip().partition(" ")
        rest = rest.lstrip()
    return rest or "pass"


def _parse(lines: list[str]) -> tuple[ast.AST | None, list[str], int]:
    """The cell's syntax tree (``None``: not Python), the lines of magics it does not read, and
    the line of the error."""
    error_line = 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarning: invalid escape sequences
        try:
            return ast.parse("\n".join(lines)), [], 0
        except PARSE_ERRORS as error:
            error_line = getattr(error, "lineno", None) or 1
        plain, unread = _without_ipython(lines)
        try:
            return ast.parse(plain), unread, 0
        except PARSE_ERRORS:
            return None, unread, error_line


def _chain(node: ast.AST) -> tuple[str, ...]:
    """The dotted name ``node`` reaches, with ``getattr(x, "name")`` read as ``x.name``; the
    first part is empty where the name starts from an expression (``super().forward``)."""
    parts = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif _literal_attribute_call(node, "getattr"):
            parts.append(node.args[1].value)
            node = node.args[0]
        else:
            break
    parts.append(node.id if isinstance(node, ast.Name) else "")
    parts.reverse()
    if len(parts) > MAX_PARTS:  # no real name is this long: its start and its end are what matter
        parts = parts[:MAX_PARTS // 2] + parts[-MAX_PARTS // 2:]
    return tuple(parts)


def _is_chain(node: ast.AST) -> bool:
    return isinstance(node, (ast.Attribute, ast.Name)) or _literal_attribute_call(node, "getattr")


def _attribute_call(node: ast.AST, names=("getattr", "setattr", "delattr")) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names
            and len(node.args) >= 2 and not node.keywords)


def _literal_attribute_call(node: ast.AST, name: str) -> bool:
    """``getattr(x, "name")`` (or setattr, delattr): an attribute named in the source."""
    return (_attribute_call(node, (name,)) and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str))


def _bindings(node: ast.AST):
    """(name, dotted name) for each alias ``node`` binds: imports, and ``name = a.b.c``."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                yield alias.asname, tuple(alias.name.split("."))
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
        for alias in node.names:
            yield alias.asname or alias.name, (*node.module.split("."), alias.name)
    elif isinstance(node, (ast.Assign, ast.NamedExpr)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if len(targets) == 1 and isinstance(targets[0], ast.Name) and _is_chain(node.value):
            parts = _chain(node.value)
            if parts[0] and parts != (targets[0].id,):
                yield targets[0].id, parts


def _aliases(trees) -> dict[str, list[tuple[str, ...]]]:
    """What each alias of the notebook may stand for (``fn``: ``torch.nn.functional``)."""
    aliases = {name: [parts] for name, parts in GIVEN_NAMES.items()}
    for tree in trees:
        for node in ast.walk(tree):
            for name, parts in _bindings(node):
                targets = aliases.setdefault(name, [])
                if parts not in targets and len(targets) < MAX_BINDINGS:
                    targets.append(parts)
    return aliases


def _resolutions(parts: tuple[str, ...], aliases: dict) -> list[tuple[str, ...]]:
    """``parts`` and what it stands for through the notebook's aliases (a few at most)."""
    found, todo = [parts], [parts]
    while todo and len(found) < MAX_RESOLUTIONS:
        current = todo.pop()
        for target in aliases.get(current[0], ()):
            name = target + current[1:]
            if name not in found and len(found) < MAX_RESOLUTIONS:
                found.append(name)
                todo.append(name)
    return found


def _uses(node: ast.AST, called: set[int]):
    """(dotted name, how it is used) for each name ``node`` uses; how: ``import``, ``define``,
    ``store``, ``call`` or ``load``."""
    if isinstance(node, (ast.Name, ast.Attribute)) or _literal_attribute_call(node, "getattr"):
        if isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del)):
            kind = "store"
        else:
            kind = "call" if id(node) in called else "load"
        yield _chain(node), kind
    if _literal_attribute_call(node, "setattr") or _literal_attribute_call(node, "delattr"):
        yield _chain(node.args[0]) + (node.args[1].value,), "store"
    elif isinstance(node, ast.Import):
        for alias in node.names:
            yield tuple(alias.name.split(".")), "import"
    elif isinstance(node, ast.ImportFrom):
        module = ("",) * node.level + tuple((node.module or "").split("."))
        yield module, "import"
        for alias in node.names:
            yield module + (alias.name,), "import"
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield (node.name,), "define"


def _grader_used(parts: tuple[str, ...], kind: str) -> bool:
    """A name of the grader's (``autograder....``) used otherwise than the given cells use it."""
    if kind == "import" and parts in IMPORTABLE:
        return False
    of_checks = len(parts) >= 3 and parts[:-1] in CHECK_MODULES
    if kind == "import" and of_checks and parts[-1].startswith("check_"):
        return False  # from autograder.exercises.ex02_batch_norm.checks import check_training_forward
    if parts in PUBLIC_NAMES or (of_checks and parts[-1] in CHAPTER_NAMES):
        return kind == "store"
    checking = of_checks and parts[-1].startswith("check_")
    return not (checking and kind == "call")


def _torch_private(parts: tuple[str, ...]) -> bool:
    return parts[0] == "torch" and any(p.startswith("_") and not (p.startswith("__") and p.endswith("__"))
                                       for p in parts[1:])


def _layer_internals(parts: tuple[str, ...], kind: str) -> bool:
    """A layer's ``forward`` taken without calling it, or torch's input check replaced."""
    if kind == "store":
        return parts[-1] == "_check_input_dim"
    return "forward" in parts[1:-1] or (len(parts) > 1 and parts[-1] == "forward" and kind == "load")


def _routes(parts: tuple[str, ...], kind: str) -> frozenset[str]:
    """The routes a dotted name, used so, takes."""
    if parts[0] == "autograder":  # the grader's names are judged by what of them is used
        return frozenset({GRADER} if _grader_used(parts, kind) else ())
    dotted = "." + ".".join(parts) + "."
    routes = [route for part in parts for route in INDEX["part"].get(part, ())]
    routes += INDEX["whole"].get(dotted[1:-1], ())
    if any(part.startswith(INDEX["any prefix"]) for part in parts):
        routes += [route for prefix, route in INDEX["prefix"] for part in parts if part.startswith(prefix)]
    routes += [route for needle, route in INDEX["inside"] for part in parts if needle in part]
    if len(parts) > 1:
        routes += [route for needle, route in INDEX["sequence"] if needle in dotted]
    taken = {route.what for route in routes if len(parts) > 1 or not route.qualified}
    if _torch_private(parts):
        taken.add(PRIVATE)
    if _layer_internals(parts, kind):
        taken.add(NORMALIZATION)
    if parts == ("globals",) and kind == "call":
        taken.add(GRADER)
    return frozenset(taken)


NORM_CLASS = re.compile(r"_?[A-Z]\w*")  # a class's name (``_BatchNorm``, ``BatchNorm2d``), not a function's


def _is_norm_class(node: ast.AST, aliases: dict) -> bool:
    """``node`` names one of torch's normalization classes by its module (``nn.modules.batchnorm._BatchNorm``,
    or a name imported from there): something to test a module against, which runs nothing."""
    if not isinstance(node, (ast.Attribute, ast.Name)):
        return False
    return any(parts[:-1] in NORM_MODULES and NORM_CLASS.fullmatch(parts[-1])
               for parts in _resolutions(_chain(node), aliases))


def _norm_base_classes(node: ast.AST, aliases: dict) -> list[ast.AST]:
    """In ``isinstance(m, ...)``, or in a tuple or list of classes: torch's normalization classes
    named, as torch itself tests for them (``nn.modules.batchnorm._BatchNorm``)."""
    candidates = node.elts if isinstance(node, (ast.Tuple, ast.List)) else [node]
    return [c for c in candidates if _is_norm_class(c, aliases)]


def _imports_norm_classes(node: ast.AST) -> bool:
    """``from torch.nn.modules.batchnorm import _BatchNorm``: classes to test modules against."""
    return (isinstance(node, ast.ImportFrom) and not node.level and bool(node.module)
            and tuple(node.module.split(".")) in NORM_MODULES
            and all(NORM_CLASS.fullmatch(alias.name) for alias in node.names))


def _opaque(value) -> bool:
    if isinstance(value, bytes):
        return len(value) > OPAQUE_CHARS
    return len(value) > OPAQUE_CHARS and max(map(len, NOT_ENCODED.split(value))) > OPAQUE_CHARS


def _names_internals(text: str) -> bool:
    return any(part in text for part in STRING_PARTS) or not STRING_WORDS.isdisjoint(WORD.findall(text))


def _namespace(node: ast.AST) -> bool:
    """``globals()``, ``vars(x)``, ``locals()`` or ``x.__dict__``: names looked up as data."""
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Name) and node.func.id in ("globals", "vars", "locals")
    return isinstance(node, ast.Attribute) and node.attr == "__dict__"


def _read(tree: ast.AST, lines: list[str], aliases: dict) -> dict[str, tuple[int, str]]:
    """Each route the tree takes, with the first line (number and text shown) it takes it on."""
    found: dict[str, tuple[int, str]] = {}

    def note(what: str, node: ast.AST, shown: str | None = None) -> None:
        number = min(getattr(node, "lineno", 1), len(lines))
        if what not in found or number < found[what][0]:
            found[what] = (number, shown if shown is not None else _shorten(lines[number - 1]))

    inner, called, exempt, docstrings, cache = set(), set(), set(), set(), {}
    for node in ast.walk(tree):  # breadth first: a node's parent is seen before it
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            docstrings.add(id(node.value))
        elif isinstance(node, ast.Attribute) and _is_chain(node.value):
            inner.add(id(node.value))
        elif isinstance(node, ast.Call):
            called.add(id(node.func))
            if _literal_attribute_call(node, "getattr") and _is_chain(node.args[0]):
                inner.add(id(node.args[0]))
            elif _attribute_call(node) and not _literal_attribute_call(node, node.func.id):
                note(COMPUTED_NAME, node)
            if isinstance(node.func, ast.Name) and node.func.id in ("isinstance", "issubclass") and len(node.args) == 2:
                exempt.update(id(c) for c in _norm_base_classes(node.args[1], aliases))
        elif isinstance(node, (ast.Tuple, ast.List)):
            exempt.update(id(c) for c in _norm_base_classes(node, aliases))
        elif _imports_norm_classes(node):
            exempt.add(id(node))
        if isinstance(node, (ast.Subscript, ast.Attribute)) and _namespace(node.value):
            note(NAMESPACE, node)
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            if _opaque(node.value):
                note(OPAQUE, node)
            if isinstance(node.value, str) and id(node) not in docstrings and _names_internals(node.value):
                note(STRING, node, repr(node.value)[:SHOWN_CHARS])
        if id(node) in inner or id(node) in exempt:
            continue
        for parts, kind in _uses(node, called):
            if (parts, kind) not in cache:
                cache[parts, kind] = _routes_through_aliases(parts, kind, aliases)
            for what in cache[parts, kind]:
                note(what, node)
    return found


def _routes_through_aliases(parts: tuple[str, ...], kind: str, aliases: dict) -> set[str]:
    """The routes a name takes, as written and as what its first part is an alias of (a name
    bound, imported or defined is taken as written)."""
    bound = kind in ("import", "define") or (kind == "store" and len(parts) == 1)
    names = [parts] if bound else _resolutions(parts, aliases)
    return set().union(*(_routes(name, kind) for name in names))


def scan_source(cells: list[tuple[int, str]]) -> list[Finding]:
    """Every route the given code cells take, once per route and cell, with the line it is on."""
    found, parsed, budget = [], [], MAX_NOTEBOOK_CHARS
    for index, source in cells:
        budget -= max(min(len(source), MAX_CELL_CHARS), MIN_CELL_COST)
        first = _shorten(source[:10 * SHOWN_CHARS].lstrip().split("\n", 1)[0])
        if budget < 0:
            found.append(Finding(index, first, NOTEBOOK_TOO_LONG))
            break
        if not source.strip():
            continue
        if len(source) > MAX_CELL_CHARS:
            found.append(Finding(index, first, TOO_LONG))
            continue
        lines = _lines(source)
        too_long = next((line for line in lines if len(line) > MAX_LINE_CHARS), None)
        if too_long is not None:
            found.append(Finding(index, _shorten(too_long), TOO_LONG))
            continue
        tree, unread, error_line = _parse(lines)
        if unread:
            found.append(Finding(index, _shorten(unread[0]), MAGIC))
        if tree is None:
            found.append(Finding(index, _shorten(lines[min(error_line, len(lines)) - 1]), UNPARSED))
        else:
            parsed.append((index, lines, tree))
    aliases = _aliases(tree for _, _, tree in parsed)
    for index, lines, tree in parsed:
        routes = _read(tree, lines, aliases)
        found += [Finding(index, shown, what) for what, (_, shown) in
                  sorted(routes.items(), key=lambda item: (ORDER.get(item[0], len(ORDER)), item[1][0]))]
    return sorted(found, key=lambda finding: finding.cell)


def read_notebook(path) -> nbformat.NotebookNode:
    """A submitted notebook as it is, quickly: JSON without nbformat's validation, which costs
    about a second per megabyte (older formats are converted by nbformat)."""
    with open(path, "rb") as file:
        content = json.loads(file.read())
    if not isinstance(content, dict) or content.get("nbformat") != 4 or not isinstance(content.get("cells"), list):
        return nbformat.read(str(path), as_version=4)
    from nbformat.v4.rwbase import rejoin_lines  # the lists of lines nbformat writes, as strings

    return rejoin_lines(nbformat.from_dict(content))


def scan_notebook(path, given: set[str] | None = None) -> list[Finding]:
    """Findings in the student's cells of a submitted notebook (nothing for an unreadable one);
    ``given``: the stripped sources of the release's locked cells."""
    try:
        nb = read_notebook(path)
    except Exception:  # noqa: BLE001 - the report says elsewhere that it is unreadable
        return []
    return scan_source(_student_cells(nb, given))
