"""Feedback a student can read (issue 26).

* a failed check shows ``CheckFailed: <message>`` alone, in the live notebook (IPython's
  ``_render_traceback_`` hook, through a real kernel) and in nbgrader's Validate (its Validator);
* two values a message says differ are printed differing;
* the feedback page (the course's template, nbgrader_config.py's preprocessors): each part named,
  each test cell's verdict in words instead of the live notebook's lines, a policy that lets only
  the page's own scripts run and reaches no other origin, the vendored MathJax inlined;
* a student whose notebook was not graded gets a page that says why and what to do;
* end to end: the real grade command and ``nbgrader generate_feedback`` on a small class, and the
  pages in Chromium (math typeset offline, nothing off the right edge, nothing blocked but fonts),
  with screenshots in test-artifacts/feedback/.
"""
from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor, Preprocessor
from traitlets.config import Config

from autograder.grading.feedback import ClearHiddenTestsInTestCells, GradedVerdicts, HideTracebacks, part_titles, printed_constants
from autograder.grading import not_graded
from autograder.grading.pages import BOOTSTRAP_CSS, FeedbackExporter, feedback_config
from autograder.core.messages import CheckFailed, two_values
from course import ASSIGNMENTS, REPO, release_notebook, source_notebook, tool_env

ANSI = re.compile(r"\x1b\[[0-9;]*m")
POLICY = re.compile(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">')


# ------------------------------------------------------------------ values printed differing

def test_two_values_get_the_digits_that_tell_them_apart():
    assert two_values(1.44993, 1.48773) == ("1.44993", "1.48773")  # six digits suffice: unchanged
    assert two_values(-1.5637002, -1.5637008) == ("-1.563700", "-1.563701")  # "-1.5637" twice before
    assert two_values(2.0, 2.0) == ("2", "2")
    near = math.nextafter(1.0, 2.0)
    shown = two_values(1.0, near)
    assert shown[0] != shown[1] and (float(shown[0]), float(shown[1])) == (1.0, near)
    assert two_values(float("nan"), float("nan")) == ("nan", "nan")
    assert two_values(1.0, float("inf")) == ("1", "inf")


def test_a_checks_message_shows_the_two_values_differing():
    from autograder.exercises.ex02_batch_norm import checks

    def batch_mean_var(x):  # off by 3e-8 of the variance: beyond float64's tolerance, within 6 digits
        dims = [0] + list(range(2, x.dim()))
        return x.mean(dim=dims), x.var(dim=dims, unbiased=False) * (1 + 3e-8)

    with pytest.raises(CheckFailed) as failed:
        checks.check_batch_mean_var(batch_mean_var)
    yours, expected = re.search(r"yours (\S+), expected ([^\s)]+)\)", str(failed.value)).groups()
    assert yours != expected and float(yours) != float(expected), str(failed.value)


# ------------------------------------------------------------------ live notebook and Validate

def test_a_kernel_shows_only_the_message_of_a_failed_check():
    """IPython asks the exception for its traceback (``_render_traceback_``): the error output a
    live notebook shows is the message, not the grader's frames."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "from autograder.core.messages import fail\nfail('your y differs.\\nLikely cause: a reason.')")])
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True).execute()
    (error,) = [o for o in nb.cells[0].outputs if o.output_type == "error"]
    assert error.ename == "CheckFailed" and error.evalue == "your y differs.\nLikely cause: a reason."
    assert ANSI.sub("", "\n".join(error.traceback)) == "CheckFailed: your y differs.\nLikely cause: a reason."


def test_a_long_message_is_wrapped_where_ipython_shows_it():
    message = "BatchNorm1d(3) in float64 on cpu: step 1 of 6, " + "your running_var differs " * 8 + "\nLikely cause: n/(n − 1)."
    shown = ANSI.sub("", CheckFailed(message)._render_traceback_()[0])
    assert shown.startswith("CheckFailed: BatchNorm1d(3)") and max(len(line) for line in shown.splitlines()) <= 80
    assert " ".join(shown.split()) == " ".join(f"CheckFailed: {message}".split()), "every word, in order"
    assert "\nLikely cause: n/(n − 1)." in shown


@pytest.mark.slow
def test_validate_shows_the_message_first(tmp_path):
    """nbgrader's Validator (the Validate button) on the release with a catalogued bug: each
    failed part's error is the check's message from its first line, with no traceback."""
    from nbgrader.validator import Validator

    from course import notebook_with_code
    from demo_class import catalogue

    path = tmp_path / "02_batch_norm.ipynb"
    nbformat.write(notebook_with_code("02_batch_norm", catalogue("02_batch_norm", "bug_running_var_biased")), path)
    config = Config()
    config.Execute.timeout = 300
    failed = Validator(config=config).validate(str(path))["failed"]
    # The parts' cells (the questions' fail with NameError here: this student left them unanswered).
    errors = [ANSI.sub("", cell["raw_error"]) for cell in failed if "checks.check_" in cell["source"]]
    assert errors, "the bug must fail a visible check"
    for error in errors:
        assert error.startswith("CheckFailed: ") and "Traceback" not in error and "autograder/" not in error, error
    assert any("running_var" in e and "\nLikely cause: " in e for e in errors), errors
    assert max(len(line) for e in errors for line in e.splitlines()) <= 80, "nbgrader validate cuts lines at 87"


# ------------------------------------------------------------------ the parts' names

@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_test_cell_is_named_by_its_part(assignment):
    nb = release_notebook(assignment)
    given = {c.source for c in nb.cells if c.cell_type == "markdown"}
    titles = part_titles(nb, given)
    test_cells = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells
                  if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution")]
    assert sorted(titles) == sorted(test_cells)
    for grade_id, title in titles.items():
        assert re.fullmatch(r"Part \d+: \S.*|Question \d+", title) and "the test" not in title, (grade_id, title)
        assert "points" not in title and "`" not in title, title


def test_part_names_come_from_the_release_never_from_the_student():
    nb = release_notebook("02_batch_norm")
    given = {c.source for c in nb.cells if c.cell_type == "markdown"}
    at = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "test_running_statistics")
    nb.cells.insert(at, nbformat.v4.new_markdown_cell("## Part 3: full marks for this one (3 points)"))
    titles = part_titles(nb, given)
    assert titles["test_running_statistics"] == "Part 3: running statistics and eval mode"
    assert titles["test_question_2"] == "Question 2"
    assert part_titles(nb, set())["test_running_statistics"] == "Test cell test_running_statistics"


def test_the_live_lines_of_a_test_cell_are_its_constant_prints():
    cell = next(c for c in source_notebook("02_batch_norm").cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_question_1")
    assert printed_constants(cell.source) == {"Question 1: answer recorded (graded when the notebook is graded)."}
    assert printed_constants("print(f'{x}')\nprint('a', 'b')\nprint(") == set()


# ------------------------------------------------------------------ the page

SCORES = {"test_batch_mean_var": 2, "test_training_forward": 2, "test_running_statistics": 0,
          "test_module_contract": 1, "test_question_1": 0, "test_question_2": 1}
PART3 = ("BatchNorm1d(3) in float64 on cpu: step 1 of 6 (training forward on input (6, 3)), your running_var differs "
         "from torch.nn.BatchNorm1d's: max error 0.0378 at [1] (yours 1.44993, torch 1.48773; allowed 2e-09).\n"
         "Likely cause: running_var is off by a factor n/(n − 1) = 6/5: PyTorch updates it with the unbiased batch "
         "variance (but normalizes with the biased one).")
QUESTION1 = "Question 1: your answer 1.4 is not right. Channel 0 is x[:, 0, :]: m = N·L = 4 values <b>1</b>."


def graded_notebook() -> nbformat.NotebookNode:
    """02_batch_norm as the grader leaves it for a student with a bug in part 3 and a wrong answer
    to question 1: each test cell's live line printed, and the failed checks' errors."""
    nb = source_notebook("02_batch_norm")
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="".join(
                f"{line}\n" for line in sorted(printed_constants(cell.source))))]
            if meta["grade_id"] == "test_question_2":
                cell.outputs.append(nbformat.v4.new_output("stream", name="stdout", text="Question 2, your justification: because.\n"))
            message = {"test_running_statistics": PART3, "test_question_1": QUESTION1}.get(meta["grade_id"])
            if message:
                cell.outputs.append(nbformat.v4.new_output("error", ename="CheckFailed", evalue=message,
                                                           traceback=[f"CheckFailed: {message}"]))
    return nb


class Scored(Preprocessor):
    """What nbgrader's GetGrades adds from the gradebook: each graded cell's score and points."""

    def preprocess_cell(self, cell, resources, index):
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade_id") in SCORES:
            meta["score"] = SCORES[meta["grade_id"]]
        return cell, resources


class ReleaseVerdicts(GradedVerdicts):
    def given_markdown(self, resources):
        return {c.source for c in release_notebook("02_batch_norm").cells if c.cell_type == "markdown"}


def render(nb) -> str:
    """The feedback page as nbgrader_config.py's preprocessors make it (GetGrades stood in for)."""
    config = Config()
    config.HTMLExporter.sanitize_html = True  # as protect_formgrader sets it for the formgrader
    feedback_config(config)
    config.Exporter.default_preprocessors = []
    config.HTMLExporter.extra_template_paths = [str(BOOTSTRAP_CSS)]
    config.FeedbackExporter.preprocessors = [Scored, ClearHiddenTestsInTestCells, HideTracebacks, ReleaseVerdicts,
                                             CSSHTMLHeaderPreprocessor]
    resources = {"nbgrader": {"notebook": "02_batch_norm", "score": 6, "max_score": 10, "late_penalty": 0}}
    return FeedbackExporter(config=config).from_notebook_node(nb, resources=resources)[0]


@pytest.fixture(scope="module")
def page() -> str:
    return render(graded_notebook())


def outputs_text(html: str) -> str:
    """What the output areas show (printed text, errors), tags removed."""
    import html as entities

    areas = re.findall(r'<div class="output_subarea[^"]*">(.*?)</div>', html, flags=re.S)
    return entities.unescape(re.sub(r"<[^>]+>", "", "\n".join(areas)))


def test_the_summary_names_each_part_with_its_score_and_verdict(page):
    rows = [re.sub(r"<[^>]+>|\s+", " ", row).split() for row in re.findall(r"<tr class=\"verdict-[a-z]+\">(.*?)</tr>", page, re.S)]
    rows = [" ".join(row) for row in rows]
    assert rows == [
        "Part 1: the batch statistics 2 / 2 passed",
        "Part 2: training mode 2 / 2 passed",
        "Part 3: running statistics and eval mode 0 / 3 failed",
        "Part 4: the module contract 1 / 1 passed",
        "Question 1 0 / 1 wrong",
        "Question 2 1 / 1 correct",
    ]
    assert "Test cell" not in page and "02_batch_norm: 6 / 10 points" in page
    assert '<h3 id="Part-3:-running-statistics' in page and "&lt;h" not in page and "&lt;p&gt;" not in page


def test_each_test_cell_says_what_the_grader_concluded(page):
    import html as entities

    verdicts = [entities.unescape(re.sub(r"<[^>]+>", "", v)).strip()
                for v in re.findall(r'<div class="verdict [^"]*">(.*?)</div>', page, re.S)]
    assert verdicts[0] == "Part 1: the batch statistics: passed."
    assert verdicts[2] == f"Part 3: running statistics and eval mode: failed: {PART3}"
    assert verdicts[4] == "Question 1: wrong: your answer 1.4 is not right. Channel 0 is x[:, 0, :]: m = N·L = 4 values <b>1</b>."
    assert verdicts[5] == "Question 2: correct."
    shown = outputs_text(page)
    assert "visible checks passed" not in shown and "answer recorded" not in shown  # the live lines are gone
    assert "CheckFailed" not in shown, "the message is said once, as the verdict"
    assert "Question 2, your justification: because." in shown  # what the checks printed stays
    assert "<b>1</b>" not in page, "a message is text, never markup"


def test_the_page_runs_only_its_own_scripts_and_reaches_nothing(page):
    head = page[:page.index("</head>")]
    (policy,) = POLICY.findall(head)
    assert head.index("Content-Security-Policy") < head.index("<script")
    rules = dict(rule.strip().split(" ", 1) for rule in policy.split(";"))
    nonce = re.fullmatch(r"'nonce-([A-Za-z0-9_\-]+)'", rules["script-src"]).group(1)
    assert rules["default-src"] == "'none'" and "unsafe" not in rules["script-src"] and "unsafe-eval" not in policy
    assert not re.search(r"https?:|'self'|\*", policy), policy
    assert page.count("<script") == page.count(f'<script nonce="{nonce}">') == 2  # MathJax's configuration and MathJax
    assert "cdnjs" not in page and not re.search(r"<script[^>]*\bsrc=", page)
    assert "white-space: pre-wrap" in page


def test_mathjax_is_inlined_only_where_there_is_math():
    mathjax = (REPO / "book" / "_static" / "mathjax" / "tex-svg.js").read_text()
    assert mathjax[:2000].replace("<!--", "<\\!--") in render(graded_notebook())
    without_math = graded_notebook()
    without_math.cells = [c for c in without_math.cells if c.cell_type == "code"]
    assert "window.MathJax" not in render(without_math)


# ------------------------------------------------------------------ not graded

DEMO_REASONS = {  # the grade command's reasons (autograder/grading/grade.py) -> a phrase of the student's page
    "ran out of memory (limit 3072 MB)": "ran out of memory",
    "the kernel ignored the interrupt after a cell timed out (an endless loop inside try/except?)": "time limit",
    "still running after 120 s (an endless loop that ignores interrupts?); killed": "time limit",
    "the kernel died while running the notebook (os._exit, a crash, or memory)": "stopped before the end",
    "the submission is larger than 64 MB; not opened": "larger than the grader accepts",
    "nbgrader refused the notebook's cell metadata (cells copied or their nbgrader ids changed, so that two cells "
    "share one id?)": "fresh copy",
    "a cell's output passed the output limit (an endless print?)": "more output",
}


@pytest.mark.parametrize("reason", DEMO_REASONS)
def test_a_student_not_graded_is_told_why_and_what_to_do(reason):
    why, todo = not_graded.for_the_student(reason)
    assert DEMO_REASONS[reason] in why + todo and "submit again" in todo


def test_an_unknown_reason_is_not_shown_to_the_student():
    why, todo = not_graded.for_the_student("nbgrader could not grade it: /course/solutions/x.py line 3")
    assert "solutions" not in why + todo and "instructor" in why + todo


def test_the_not_graded_page_is_written_where_nbgrader_releases_feedback_and_removed_once_graded(tmp_path, monkeypatch):
    from nbgrader.api import Gradebook

    monkeypatch.setenv("PATH", tool_env()["PATH"])  # nbgrader runs alembic to make a gradebook
    (tmp_path / "nbgrader_config.py").write_text((REPO / "nbgrader_config.py").read_text())
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        gb.update_or_create_assignment("02_batch_norm")
        gb.update_or_create_notebook("02_batch_norm", "02_batch_norm")
    submitted = tmp_path / "submitted" / "alice" / "02_batch_norm"
    submitted.mkdir(parents=True)
    (submitted / "timestamp.txt").write_text("2026-12-01 20:32:41.258221 UTC")
    (submitted / "submission_secret.txt").write_text("s3cret")
    reason = "the kernel died while running the notebook (os._exit, a crash, or memory)"
    pages = not_graded.update(tmp_path, "02_batch_norm", {"alice": reason, "bob": None})
    folder = tmp_path / "feedback" / "alice" / "02_batch_norm"
    assert pages == [folder / "02_batch_norm.html"]
    assert (folder / "timestamp.txt").read_text() == "2026-12-01 20:32:41.258221 UTC"
    assert (folder / "submission_secret.txt").read_text() == "s3cret"
    html = pages[0].read_text()
    assert "02_batch_norm: not graded" in html and "stopped before the end" in html and "What to do:" in html
    assert reason not in html, "the student's words, not the report's"
    (policy,) = POLICY.findall(html)
    assert "script-src 'nonce-" in policy and not (tmp_path / "feedback" / "bob").exists()
    not_graded.update(tmp_path, "02_batch_norm", {"alice": None})  # graded on a second run
    assert not folder.exists()


# ------------------------------------------------------------------ end to end, in Chromium

FEEDBACK_SHOTS = Path(__import__("os").environ.get("COURSE_TEST_ARTIFACTS", REPO / "test-artifacts")) / "feedback"
PAGE_STATE = """async () => {
  if (window.MathJax && MathJax.startup) await MathJax.startup.promise;
  const prose = document.body.cloneNode(true);
  prose.querySelectorAll('pre, code, script, style, mjx-container, .input_area').forEach(e => e.remove());
  const root = document.documentElement;
  return {
    typeset: document.querySelectorAll('mjx-container').length,
    errors: [...document.querySelectorAll('[data-mjx-error], mjx-merror')].map(e => e.textContent),
    raw: ['$$', '\\\\frac', '\\\\sqrt'].filter(d => prose.textContent.includes(d)),
    pageWider: root.scrollWidth > root.clientWidth,
    cut: [...document.querySelectorAll('.output_subarea pre, .verdict, .not-graded p')]
      .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent.slice(0, 80)),
  };
}"""


def look_at(browser, path: Path, shots: dict[str, str | None]) -> dict:
    """Open a feedback file as a student does (file://), wait for MathJax, take screenshots
    (name -> the element to scroll to, None for the top), and say what the page shows."""
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    violations = []
    page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort())
    page.goto(path.as_uri(), wait_until="load")
    state = page.evaluate(PAGE_STATE)
    FEEDBACK_SHOTS.mkdir(parents=True, exist_ok=True)
    for name, selector in shots.items():
        if selector:
            page.locator(selector).first.scroll_into_view_if_needed()
            page.evaluate("() => window.scrollBy(0, -150)")
        else:
            page.evaluate("() => window.scrollTo(0, 0)")
        page.screenshot(path=str(FEEDBACK_SHOTS / f"{name}.png"))
    page.close()
    # Bootstrap's stylesheet names its icon font beside it; the policy blocks it and nothing uses it.
    return {**state, "blocked": [v for v in violations if "font-src" not in v]}


@pytest.mark.slow
@pytest.mark.browser
def test_feedback_pages_of_a_graded_class_in_chromium(tmp_path):
    from test_browser import CHROMIUM_ARGS, find_chromium

    from course import notebook_with_code
    from demo_class import WRONG_ANSWERS, build_class_course, catalogue, with_answers

    chromium = find_chromium()
    if chromium is None:
        pytest.skip("Chromium is needed (tests/test_browser.py installs it)")
    a = "02_batch_norm"
    students = {
        "solution": (source_notebook(a), None),
        "running_var_biased": (notebook_with_code(a, catalogue(a, "bug_running_var_biased")), None),
        "wrong_answers": (with_answers(a, WRONG_ANSWERS), None),
        "kills_kernel": (notebook_with_code(a, catalogue(a, "correct_welford"), ["import os\nos._exit(1)"]), None),
    }
    build_class_course(tmp_path, {a: students})
    grade = subprocess.run([sys.executable, "-m", "autograder.grade", a, "--workers", "2", "--cell-timeout", "15",
                            "--timeout", "120", "--memory-mb", "3072"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=1800, env=tool_env())
    assert "kills_kernel: NOT GRADED" in grade.stdout, grade.stdout[-3000:] + grade.stderr[-3000:]
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_feedback", a, "--force"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=1800, env=tool_env())
    assert done.returncode == 0, done.stderr[-3000:]
    assert "not recognized" not in done.stderr, done.stderr[-3000:]
    pages = {p.parts[-3]: p for p in (tmp_path / "feedback").glob(f"*/{a}/{a}.html")}
    assert sorted(pages) == sorted(students)
    texts = {s: p.read_text() for s, p in pages.items()}
    assert "Part 3: running statistics and eval mode" in texts["running_var_biased"]
    assert "running_var is off by a factor n/(n − 1)" in texts["running_var_biased"]
    assert "Question 1: wrong</span>: your answer 1.4 is not right." in texts["wrong_answers"]
    assert texts["solution"].count('class="verdict verdict-good') == 6
    assert "not graded" in texts["kills_kernel"] and "stopped before the end" in texts["kills_kernel"]
    for student, html in texts.items():  # the release's markdown renders as HTML, not as tags
        assert "&lt;h2" not in html and "&lt;p&gt;" not in html and "&lt;th&gt;" not in html, student

    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            seen = {
                "running_var_biased": look_at(browser, pages["running_var_biased"], {
                    "graded-failures-summary": None, "graded-failures-part3": "#test_running_statistics",
                    "graded-failures-question1": "#test_question_1", "graded-failures-math": "#test_question_2"}),
                "wrong_answers": look_at(browser, pages["wrong_answers"], {"wrong-answers-question1": "#test_question_1"}),
                "solution": look_at(browser, pages["solution"], {"passing-summary": None,
                                                                  "passing-question2": "#test_question_2"}),
                "kills_kernel": look_at(browser, pages["kills_kernel"], {"not-graded": None}),
            }
        finally:
            browser.close()
    for student, state in seen.items():
        assert state["blocked"] == [] and not state["pageWider"] and state["cut"] == [], (student, state)
        if student != "kills_kernel":
            assert state["typeset"] > 10 and state["errors"] == [] and state["raw"] == [], (student, state)
