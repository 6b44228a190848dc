"""What every exercise's catalogue of submissions must show, written once.

A catalogue (``tests/submissions/<topic>/``) holds whole answers as a student would write them:
``correct_*`` pass every graded part, each ``bug_*`` fails exactly the parts it breaks with the
phrase that names its misconception (partial credit for the rest), and each ``cheat_*`` earns
nothing for the parts it cheats on when graded the way ``autograder.grade`` grades it: in the
sandboxed kernel, with every test cell judged in the grader.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from course import is_solution_cell, load_namespace, grade_notebook, release_notebook, run_parts, solution_code, submission_files

CHEAT_PHRASES = ("earns no points", "has replaced")


@dataclass
class Catalogue:
    assignment: str
    parts: dict  # part name -> check(namespace, full)
    bugs: dict[str, dict[str, str]]  # bug file -> {part: phrase its message must contain}
    cheats: dict[str, dict[str, str]] = field(default_factory=dict)  # cheat file -> {part: phrase}

    def correct(self) -> dict[str, str]:
        found = {p.stem: p.read_text() for p in submission_files(self.assignment, "correct")}
        found["notebook_solution"] = solution_code(self.assignment)
        return found

    def _code(self, kind: str, name: str) -> str:
        return next(p for p in submission_files(self.assignment, kind) if p.stem == name).read_text()

    def results(self, code: str, full: bool = True) -> dict[str, str | None]:
        return run_parts(load_namespace(self.assignment, code), self.parts, full)

    def assert_complete(self) -> None:
        assert sorted(p.stem for p in submission_files(self.assignment, "bug")) == sorted(self.bugs)
        assert sorted(p.stem for p in submission_files(self.assignment, "cheat")) == sorted(self.cheats)

    def assert_correct(self, name: str) -> None:
        namespace = load_namespace(self.assignment, self.correct()[name])
        assert run_parts(namespace, self.parts) == dict.fromkeys(self.parts)
        assert run_parts(namespace, self.parts, full=False) == dict.fromkeys(self.parts)

    def assert_bug(self, name: str) -> None:
        got = self.results(self._code("bug", name))
        for part in self.parts:
            if part in self.bugs[name]:
                assert got[part] is not None and self.bugs[name][part] in got[part], (part, got[part])
            else:
                assert got[part] is None, f"{part} should pass (partial credit): {got[part]}"

    def assert_cheat(self, name: str, path: str) -> None:
        verdicts = dict(zip(self.parts, grade_notebook(self.assignment, self._code("cheat", name), path)))
        assert len(verdicts) == len(self.parts), verdicts
        for part, verdict in verdicts.items():
            phrase = self.cheats[name].get(part)
            if phrase is None:
                assert verdict is None, (part, verdict)
            else:
                assert verdict and phrase in verdict, (part, verdict)

    def assert_stub_fails(self) -> None:
        stub = "\n\n".join(c.source for c in release_notebook(self.assignment).cells if is_solution_cell(c))
        # An answer cell's stub raises at the top level (a question not answered yet): as in the
        # notebook, that cell fails and the others still run.
        stub = "\n".join(line for line in stub.splitlines() if line != "raise NotImplementedError()")
        got = self.results(stub, full=False)
        assert all(message and "NotImplementedError" in message for message in got.values()), got


def no_points(*parts: str) -> dict[str, str]:
    """Cheat expectation: these parts lose their points to the forbidden-normalization rule."""
    return dict.fromkeys(parts, CHEAT_PHRASES[0])


def tampering(parts) -> dict[str, str]:
    """Cheat expectation: tampering with the checks costs every part from the tampering on."""
    return dict.fromkeys(parts, CHEAT_PHRASES[1])
