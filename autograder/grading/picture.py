"""The class picture: one offline HTML page per grading run, written beside the report.

It shows what the class misunderstood: each part's score distribution (matplotlib, PNG images
inside the page as ``data:`` URIs) and the misconceptions the checks named in their "Likely
cause" lines, counted over the class, with the students who showed each.  The causes come from
the test cells the grader ran itself (:func:`autograder.grading.report.likely_causes`).

Everything that comes from a student (ids, reasons, notes) and every cause is HTML-escaped.  The
page needs no script and loads nothing: its Content-Security-Policy allows only its own style
(by hash) and ``data:`` images.
"""
from __future__ import annotations

import base64
import hashlib
import html
import io
from collections import defaultdict

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; max-width: 70em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
.parts { display: flex; flex-wrap: wrap; gap: 1em; }
figure { margin: 0; border: 1px solid #ddd; padding: .5em; }
figcaption { font-size: .9em; max-width: 22em; overflow-wrap: break-word; }
table { border-collapse: collapse; width: 100%; }
th, td { border: 1px solid #ccc; padding: .4em .6em; text-align: left; vertical-align: top;
         overflow-wrap: break-word; word-break: normal; white-space: pre-wrap; }
th { background: #f2f2f2; } .n { text-align: right; white-space: nowrap; } td.part { white-space: nowrap; }
.warn { background: #fff3cd; border: 1px solid #e0c36a; padding: .6em; }
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _histogram(part: str, scores: list[float], maximum: float) -> str:
    """A bar chart of how many students got each score of one part, as a data: URI."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    values = sorted(set(scores) | {0.0, maximum})
    counts = [sum(1 for s in scores if s == v) for v in values]
    figure, axes = plt.subplots(figsize=(3.6, 2.4), dpi=100)
    try:
        axes.bar([f"{v:g}" for v in values], counts, color="#4a78b5")
        axes.set_xlabel(f"points (of {maximum:g})")
        axes.set_ylabel("students")
        axes.yaxis.get_major_locator().set_params(integer=True)
        figure.tight_layout()
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png")
    finally:
        plt.close(figure)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def misconceptions(students: list[dict], order: list[str] = ()) -> list[tuple[str, str, list[str]]]:
    """(part, cause, students who showed it), the most frequent first; ties in the parts' order."""
    seen: dict[tuple[str, str], list[str]] = defaultdict(list)
    for entry in students:
        for hint in entry.get("hints", []):
            key = (hint["part"], hint["cause"])
            if entry["student"] not in seen[key]:
                seen[key].append(entry["student"])
    return sorted(((part, cause, names) for (part, cause), names in seen.items()),
                  key=lambda row: (-len(row[2]), order.index(row[0]) if row[0] in order else len(order),
                                   row[0], row[1]))


def class_picture(record: dict) -> str:
    """The page for one run's record (:func:`autograder.grading.record.record_of`)."""
    students = record["students"]
    part_names = record.get("part_names", {})  # grade id -> "Part 3: running statistics", from the release

    def title(part: str) -> str:
        return part_names.get(part) or part

    graded = [s for s in students if s["status"] == "graded"]
    not_graded = [s for s in students if s["status"] != "graded"]
    body = [f"<h1>Class picture: {_e(record['assignment'])}</h1>",
            f"<p>Graded {len(graded)} of {len(students)} submissions, {_e(record['started'])} to "
            f"{_e(record['finished'])} (UTC).</p>"]
    if record.get("stopped"):
        body.append(f'<p class="warn"><strong>Stopped:</strong> {_e(record["stopped"])}</p>')
    if graded:
        mean = sum(s["score"] for s in graded) / len(graded)
        body.append(f"<p>Mean score {mean:.2f} of {record['max_score']:g}.</p>")
    body.append("<h2>Score distribution per part</h2>")
    if graded:
        body.append('<div class="parts">')
        for part, maximum in record["parts"].items():
            scores = [s["parts"].get(part, 0.0) for s in graded]
            full = sum(1 for v in scores if v >= maximum)
            body.append(f'<figure><img alt="{_e(title(part))}: scores of {len(scores)} students" '
                        f'src="{_histogram(title(part), scores, maximum)}"><figcaption><strong>{_e(title(part))}</strong>: '
                        f"{full} of {len(scores)} full marks</figcaption></figure>")
        body.append("</div>")
    else:
        body.append("<p>No submission was graded.</p>")
    rows = misconceptions(students, list(record["parts"]))
    body.append("<h2>Misconceptions the checks named</h2>")
    if rows:
        body.append('<table><thead><tr><th>part</th><th>likely cause</th><th class="n">count</th><th>students</th></tr></thead><tbody>')
        for part, cause, names in rows:
            body.append(f'<tr><td class="part">{_e(title(part))}</td><td>{_e(cause)}</td><td class="n">{len(names)}</td>'
                        f"<td>{'<br>'.join(_e(name) for name in names)}</td></tr>")  # one id a line: ids may hold commas
        body.append("</tbody></table>")
    else:
        body.append("<p>No check named a likely cause.</p>")
    if not_graded:
        body.append("<h2>Not graded</h2><table><thead><tr><th>student</th><th>why</th></tr></thead><tbody>")
        for s in not_graded:
            body.append(f"<tr><td>{_e(s['student'])}</td><td>{_e(s['reason'])}</td></tr>")
        body.append("</tbody></table>")
    style_hash = base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()
    policy = f"default-src 'none'; img-src data:; style-src 'sha256-{style_hash}'; base-uri 'none'; form-action 'none'"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
            f"<title>Class picture: {_e(record['assignment'])}</title><style>{STYLE}</style></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")
