"""The source scan and the report, on their own: the scan reads syntax trees in time linear in
the cell (with caps), finds every route and every way of running code built at run time, and
leaves the course's own code alone; the report prints what a student controls as inert text."""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import nbformat
import pytest

from autograder.grading import report, scan
from autograder.grading.report import Outcome, print_report, printable
from autograder.grading.scan import scan_notebook, scan_source
from course import ASSIGNMENTS, REPO, SUBMISSIONS, solution_code, source_notebook

PAYLOAD = "\x1b]0;pwned\x07\x1b[2J\x1b[3J"  # renames the window, clears the screen and the scrollback
SHOWN_PAYLOAD = "\\x1b]0;pwned\\x07\\x1b[2J\\x1b[3J"


def whats(source: str) -> list[str]:
    return [f.what for f in scan_source([(0, source)])]


def timed_scan(source: str) -> tuple[list[str], float]:
    start = time.perf_counter()
    found = whats(source)
    return found, time.perf_counter() - start


# --- routes around the recorder ------------------------------------------------------------------

@pytest.mark.parametrize("source, route", [
    ("from torch._refs import native_layer_norm", "decompositions"),
    ("y = torch._decomp.decomposition_table[key](x)", "decompositions"),
    ("class Quiet(TorchDispatchMode):\n    pass", "dispatch or function modes"),
    ("def __torch_function__(cls, func, types, args=(), kwargs=None):\n    return func(*args)", "dispatch or function modes"),
    ("import subprocess", "threads or processes"),
    ("os.system('python evil.py')", "threads or processes"),
    ("from concurrent.futures import ThreadPoolExecutor", "threads or processes"),
    ("sys.setprofile(None)", "profiler or tracer hooks"),
    ("from torch.func import vjp", "derivative transforms"),
    ("w = torch.nn.utils.fusion.fuse_conv_bn_weights(*args)", "derivative transforms"),
    ("from torch.utils.cpp_extension import load_inline", "native code"),
    ("kernel = torch.ops.aten.native_batch_norm", "torch.ops or torch._C"),
    ("g = model.forward.__globals__", "introspection"),
    ("import gc\nfound = gc.get_referrers(x)", "introspection"),
    ("import builtins", "the grader's own modules"),
    ("kinds = object.__subclasses__()", "the grader's own modules"),
    ("from autograder.sandbox import observe", "the grader's own modules"),
    ("checks.check_training_forward = lambda cls: None", "the grader's own modules"),
    ("y = torch.nn.functional.layer_norm(x, (3,))", "normalization functions"),
    ("from torch.nn.functional import group_norm as gn", "normalization functions"),
    ("nn.BatchNorm2d._check_input_dim = lambda self, x: None", "normalization functions"),
    ("run = nn.BatchNorm2d.forward", "normalization functions"),
    ("class Mine(nn.modules.batchnorm._BatchNorm):\n    pass", "normalization functions"),
    ("from torch.utils._mode_utils import no_dispatch", "private modules or switches"),
    ("t = torch\nguard = t._C._DisableTorchDispatch", "private modules or switches"),  # through an alias
    ("guard = getattr(torch, '_C')._DisableTorchDispatch", "private modules or switches"),  # a named getattr
    ("name = 'native_batch_norm'", "a string naming"),
])
def test_each_route_is_found(source, route):
    assert any(route in what for what in whats(source)), (source, whats(source))


def test_one_finding_per_route_and_cell_with_its_first_line():
    cells = [(3, "import os\nimport threading\nthreading.Thread(target=f).start()"), (5, "import ctypes")]
    found = scan_source(cells)
    assert [(f.cell, f.line) for f in found] == [(3, "import threading"), (5, "import ctypes")]
    assert "threads" in found[0].what and "native code" in found[1].what


# --- code built at run time ----------------------------------------------------------------------

HEX = "696d706f7274206374797065730a" * 400  # 'import ctypes\n', 5.6 kB of it

@pytest.mark.parametrize("source, reasons", [
    (f"exec(bytes.fromhex('{HEX[:140]}'))", ["exec, eval or compile", "hex"]),
    ("value = eval(text)", ["exec, eval or compile"]),
    ("code = compile(text, 'cell', 'exec')", ["exec, eval or compile"]),
    ("from builtins import exec as run\nrun(text)", ["exec, eval or compile"]),
    ("get_ipython().run_cell(text)", ["IPython's shell"]),
    ("shell = get_ipython()\nshell.run_line_magic('run', 'x.py')", ["IPython's shell"]),
    ("f = getattr(torch, 'x' + 'y')", ["a name computed at run time"]),
    ("setattr(module, name, None)", ["a name computed at run time"]),
    ("import importlib\nm = importlib.import_module('tor' + 'ch')", ["imports by name"]),
    ("m = __import__('o' + 's')", ["imports by name"]),
    ("import base64\nexec(base64.b64decode(blob))", ["decoding", "exec, eval or compile"]),
    ("import codecs\nexec(codecs.decode(text, 'rot13'))", ["decoding", "exec, eval or compile"]),
    ("import pickle\nobj = pickle.loads(blob)", ["decoding or unpickling"]),
    (f"blob = '{HEX[:5000]}'", ["opaque literal"]),
    ("blob = b'" + "\\x00" * 300 + "'", ["opaque literal"]),
    ("globals()[name] = fake", ["indexed by name"]),
    ("vars(module)[name] = fake", ["indexed by name"]),
    ("fast = torch.compile(f)", ["torch.compile"]),
])
def test_code_built_at_run_time_is_reported_with_its_reason(source, reasons):
    found = whats(source)
    for reason in reasons:
        assert any(what.startswith(scan.RUN_TIME) and reason in what for what in found), (source, reason, found)


# --- what must not be flagged --------------------------------------------------------------------

@pytest.mark.parametrize("source", [
    'def f(x):\n    """Unlike torch._decomp, exec or threading, this uses the autograder\'s idea."""\n'
    '    return x  # not exec(bytes.fromhex(...)), not torch.ops.aten.native_batch_norm',
    "layers = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]",
    "stateful = isinstance(m, (nn.modules.batchnorm._NormBase, torch.nn.modules.instancenorm._InstanceNorm))",
    "from autograder.exercises.ex02_batch_norm import checks\n\nchecks.check_training_forward(BatchNorm2d)\nprint('passed')",
    "import autograder\nDEVICE = autograder.default_device()",
    "from autograder.core import questions\nquestions.check_choice(answer_q1, 'Question 1', options='abcd')",
    "model.eval()\npattern = re.compile('x+')\nlayer.forward(x)\nsuper().forward(x)",
    "why_q1 = '" + "The mean moves with the batch, so the statistics change at every step. " * 10 + "'",
    "key = '3f2a9c'\ntorch.set_num_threads(1)",
    "%timeit layer(x)\n%matplotlib inline\nlayer?",
    "with torch.no_grad():",  # a cell that ends with an open block: half-written, still read
    # update_bn's own idiom, with the class imported, aliased or kept in a tuple first
    "from torch.nn.modules.batchnorm import _BatchNorm\nnorms = [m for m in model.modules() if isinstance(m, _BatchNorm)]",
    "from torch.nn.modules.batchnorm import _BatchNorm as BN\nnorms = [m for m in model.modules() if issubclass(type(m), BN)]",
    "KINDS = (nn.modules.batchnorm._BatchNorm,)\nnorms = [m for m in model.modules() if isinstance(m, KINDS)]",
    "KINDS = [nn.BatchNorm1d, torch.nn.modules.batchnorm._BatchNorm]",
    "from autograder.exercises.ex07_practice_lab.checks import check_recalibrate_bn\ncheck_recalibrate_bn(recalibrate_bn, full=True)",
])
def test_the_course_s_own_idioms_are_left_alone(source):
    assert whats(source) == []


@pytest.mark.parametrize("source", [
    "from torch.nn.modules.batchnorm import _BatchNorm\nclass Mine(_BatchNorm):\n    pass",
    "from torch.nn.modules.batchnorm import _BatchNorm\ny = _BatchNorm.forward(self, x)",
    "from torch.nn.modules.batchnorm import F\ny = F.batch_norm(x, None, None)",
    "from autograder.exercises.ex07_practice_lab.checks import _reference_replicas",
    # the packages a given cell imports from may be imported, not what else they hold
    "from autograder.core import engine",
    "import autograder.core\nautograder.core.numerics.close = lambda *a: True",
    "from autograder.exercises.ex02_batch_norm import hidden",
    "from autograder.exercises import ex02_batch_norm\nex02_batch_norm.checks.hint = None",
])
def test_the_same_names_used_otherwise_are_still_flagged(source):
    assert whats(source) != []


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_student_who_touched_every_given_cell_is_not_flagged_for_it(tmp_path, assignment):
    """A test cell (or another given cell, such as exercise 06's sweep) the student edited is the
    student's: its own imports and calls of the grader's public names are the course's, not a
    route around the recorder."""
    from course import is_test_cell, nbgrader_meta, release_notebook

    nb = release_notebook(assignment)
    given = {c.source.strip() for c in nb.cells if c.cell_type == "code" and nbgrader_meta(c).get("locked")}
    edited = 0
    for cell in nb.cells:
        if cell.cell_type == "code" and nbgrader_meta(cell).get("locked"):
            cell.source += "\nprint('ran it again')"
            edited += is_test_cell(cell)
    assert edited >= 3
    path = tmp_path / f"{assignment}.ipynb"
    nbformat.write(nb, path)
    assert [f.describe() for f in scan_notebook(path, given)] == []


def _without_hidden_tests(source: str) -> str:
    return report._without_hidden_tests(source)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_cell_of_the_solution_notebooks_is_left_alone(assignment):
    """Solution cells, free cells, test cells as released and the set-up: what a student who
    wrote the reference solution (and copied the given cells) hands in."""
    nb = source_notebook(assignment)
    cells = [(i, _without_hidden_tests(c.source)) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    assert [f.describe() for f in scan_source(cells)] == []
    assert scan_source([(0, solution_code(assignment))]) == []


@pytest.mark.parametrize("name, route", [
    ("hidden_torch_norm", "threads"),
    ("forges_reports", "the grader's own modules"),
    ("disables_checks", "the grader's own modules"),
    ("no_dispatch_torch_norm", "torch's private modules or switches"),
    ("reads_course", "exec, eval or compile"),
    ("hex_torch_norm", "code built or loaded at run time"),
])
def test_the_hostile_catalogue_is_listed_as_the_roundtrip_expects(name, route):
    source = (SUBMISSIONS / "hostile" / f"{name}.py").read_text()
    assert any(route in what for what in whats(source)), whats(source)


def test_a_notebook_s_given_cells_are_not_scanned(tmp_path):
    given = "from autograder.exercises.ex02_batch_norm import checks\nimport sys\nchecks.check_module_contract(BatchNorm2d)"
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(given),
        nbformat.v4.new_code_cell("class BatchNorm2d(nn.Module):\n    pass"),
        nbformat.v4.new_code_cell("checks.engine.observe._ops = lambda recorder: []"),
    ])
    path = tmp_path / "02_batch_norm.ipynb"
    nbformat.write(nb, path)
    found = scan_notebook(path, {given.strip()})
    assert [(f.cell, f.what) for f in found] == [(2, scan.GRADER)]


# --- IPython, caps and time ----------------------------------------------------------------------

def test_ipython_syntax_is_read_around_and_what_it_runs_is_reported():
    assert any("torch.ops" in w for w in whats("%timeit -n 3 -r 1 torch._C._nn.gelu(x)"))
    assert whats("!pip install evil\nx = 1") == [scan.MAGIC]
    assert whats("files = !ls\nprint(files)") == [scan.MAGIC]
    assert whats("%%bash\nls -l $HOME > files.txt") == [scan.MAGIC, scan.UNPARSED]
    assert whats("def f(:\n    pass") == [scan.UNPARSED]


def test_a_cell_or_line_over_the_caps_is_itself_a_finding():
    assert whats("x = 1\n" * (scan.MAX_CELL_CHARS // 6 + 1)) == [scan.TOO_LONG]
    assert whats("import ctypes\nx = '" + "a " * scan.MAX_LINE_CHARS + "'") == [scan.TOO_LONG]
    cells = [(i, "x = 1\n" * (scan.MAX_CELL_CHARS // 7)) for i in range(100)]
    found = scan_source(cells)
    assert [f.what for f in found] == [scan.NOTEBOOK_TOO_LONG] and found[0].cell < 10


def _normal_lines(chars: int) -> str:
    code = "\n\n".join(solution_code(a) for a in ASSIGNMENTS) + "\n"
    return (code * (chars // len(code) + 1))[:chars].rsplit("\n", 1)[0]


@pytest.mark.parametrize("name, source", [
    ("2 MB line of `from torch import nn;`", "from torch import nn;" * 100_000),
    ("2 MB cell of normal lines", _normal_lines(2_000_000)),
    ("line of `from torch import nn;` under the line cap", "from torch import nn;" * (scan.MAX_LINE_CHARS // 21)),
    ("cell of those lines under the cell cap",
     "\n".join(["from torch import nn;" * 400] * (scan.MAX_CELL_CHARS // 8500))),
    ("cell of normal lines under the cell cap", _normal_lines(scan.MAX_CELL_CHARS - 10)),
    ("cell of distinct names under the cell cap",
     "\n".join(f"v{i} = m{i}.a{i}.b{i}(x{i})" for i in range(5000))[:scan.MAX_CELL_CHARS - 100].rsplit("\n", 1)[0]),
])
def test_the_scan_takes_well_under_a_second(name, source):
    found, seconds = timed_scan(source)
    print(f"\n{name}: {len(source):,} characters scanned in {seconds * 1000:.0f} ms: {found}")
    assert seconds < 2.0  # a budget of 1 s, with room for a slow, shared machine


# --- the report ----------------------------------------------------------------------------------

def test_printable_escapes_what_a_terminal_would_obey():
    assert printable(PAYLOAD) == SHOWN_PAYLOAD
    assert printable("a\nb\tc\x7f\x9b\u202eevil\u2066") == "a\\nb\\tc\\x7f\\x9b\\u202eevil\\u2066"
    assert printable(os.fsdecode(b"bad\xff.py")) == "bad\\xff.py"
    assert printable("σ² = E[(x − μ)²], café") == "σ² = E[(x − μ)²], café"
    assert printable(printable(PAYLOAD)) == printable(PAYLOAD)


def _printed(outcomes, errors="strict") -> str:
    stream = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors=errors)
    print_report(outcomes, out=stream)
    stream.flush()
    return stream.buffer.getvalue().decode("utf-8")


def test_a_source_line_and_a_file_name_print_as_escapes(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"import ctypes  # {PAYLOAD}")])
    nbformat.write(nb, tmp_path / "02_batch_norm.ipynb")
    (tmp_path / f"helper{PAYLOAD}.py").write_text("x = 1")
    notes = [f"needs review: {f.describe()}" for f in scan_notebook(tmp_path / "02_batch_norm.ipynb")]
    notes += report._extra_files(tmp_path, {"02_batch_norm"})
    text = _printed([Outcome(f"eve{PAYLOAD}", 3.0, 6.0, notes=notes)])
    assert "\x1b" not in text and "\x07" not in text
    assert text.count(SHOWN_PAYLOAD) == 3, text  # the student id, the source line, the file name
    assert "No submission needs attention." not in text


def test_a_name_that_is_not_utf8_loses_no_later_note(tmp_path):
    os.close(os.open(os.fsencode(tmp_path) + b"/bad\xff.py", os.O_CREAT | os.O_WRONLY))
    notes = report._extra_files(tmp_path, set())
    raw = "a note made elsewhere with " + os.fsdecode(b"raw-bad-byte-\xfe")
    text = _printed([Outcome("eve", 3.0, 6.0, notes=notes + [raw, "the note after it"])])
    assert "bad\\xff.py" in text and "raw-bad-byte-\\xfe" in text and "the note after it" in text


def test_a_line_the_stream_refuses_loses_no_later_line():
    class Refusing(io.StringIO):
        def write(self, text):
            if "refused" in text:
                raise OSError("the stream refuses this line")
            return super().write(text)

    stream = Refusing()
    print_report([Outcome("eve", 3.0, 6.0, notes=["refused note", "the note after it"])], out=stream)
    assert "the note after it" in stream.getvalue() and "eve: 3/6" in stream.getvalue()


def test_the_report_prints_under_a_strict_utf8_stdout():
    code = ("import os; from autograder.grading.report import Outcome, print_report\n"
            "print_report([Outcome('eve' + os.fsdecode(b'\\xff'), None, 6.0, 'kernel died' + os.fsdecode(b'\\xfe'),\n"
            "              ['x ' + os.fsdecode(b'\\xfd'), 'the note after it'])])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONIOENCODING": "utf-8:strict"})
    assert done.returncode == 0, done.stderr
    assert "eve\\xff: NOT GRADED: kernel died\\xfe" in done.stdout and "x \\xfd" in done.stdout
    assert "the note after it" in done.stdout


def test_inspecting_a_submission_with_hostile_names(tmp_path, monkeypatch):
    """The report's notes for a submission whose student id, files and source carry escape
    sequences, with a notebook whose name is not UTF-8 (the gradebook cannot look that one up)."""
    from nbgrader.api import MissingEntry

    student = f"eve{PAYLOAD}"
    folder = tmp_path / "submitted" / student / "02_batch_norm"
    folder.mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"import ctypes  # {PAYLOAD}")])
    nbformat.write(nb, folder / "02_batch_norm.ipynb")
    nbformat.write(nb, os.fsdecode(os.fsencode(folder) + b"/copy\xff.ipynb"))
    (folder / f"notes{PAYLOAD}.txt").write_text("x")

    def find_notebook(name, assignment):
        name.encode("utf-8")  # as the database does: a name that is not text raises
        if name != "02_batch_norm":
            raise MissingEntry()
        return SimpleNamespace(grade_cells=[], source_cells=[])

    gradebook = SimpleNamespace(
        find_assignment=lambda a: SimpleNamespace(max_score=6.0, notebooks=[SimpleNamespace(name="02_batch_norm", grade_cells=[])]),
        find_notebook=find_notebook, find_submission=lambda a, s: SimpleNamespace(score=3.0, notebooks=[]))
    monkeypatch.setattr(report, "_gradebook", lambda course: contextlib.nullcontext(gradebook))
    outcome = report.inspect_submission(tmp_path, "02_batch_norm", student)
    text = _printed([outcome])
    print(text)
    assert "\x1b" not in text and "besides the notebook: copy\\xff.ipynb" in text  # listed, not scanned
    assert text.count(SHOWN_PAYLOAD) == 3, text  # the id, the notebook's line, the file
    assert outcome.score == 3.0
