"""One owner per fact: no two modules define the same constant.

A column name, a file or folder of the work directory, a config rule (the allowed values
of a setting), a baseline's name: each is spelled once, in its owner, and imported
everywhere else, so that a rename cannot leave a second spelling behind to drift. Read
from the source with ``ast``: every module-level constant whose value is a string (three
characters or more) or a tuple of strings, grouped by value. Private names (``_x``, a
module's own scratch columns) are exempt; so are the values below, different facts that
happen to be spelled alike.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pipeline

ROOT = Path(pipeline.__file__).parent

# value -> why its definitions are different facts
SPELLED_ALIKE = {
    "survey-reading-lists": "the console script, the distribution and the default repo name",
    "title": "a column (schema.TITLE, BEIR's title) and how a work was resolved (by title)",
    "score": "the score column of BEIR's qrels and that of a run",
    "baseline": "a column (schema.BASELINE) and how a baseline's work was resolved (by it)",
}
# definitions to remove: (module, name) pairs still to point at their owner
PENDING: set[tuple[str, str]] = set()


def _constants() -> dict[str, list[tuple[str, str]]]:
    found: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign):
                names, value = [t.id for t in node.targets if isinstance(t, ast.Name)], node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names, value = [node.target.id], node.value
            else:
                continue
            try:
                literal = ast.literal_eval(value) if value is not None else None
            except ValueError:
                continue
            strings = (
                isinstance(literal, tuple) and literal and all(isinstance(x, str) for x in literal)
            )
            if not (isinstance(literal, str) and len(literal) >= 3) and not strings:
                continue
            for name in names:
                if not name.startswith("_"):
                    found.setdefault(repr(literal), []).append((rel, name))
    return found


def test_no_two_modules_define_the_same_constant() -> None:
    wrong = []
    for value, where in sorted(_constants().items()):
        modules = {rel for rel, _ in where}
        if len(modules) > 1 and ast.literal_eval(value) not in SPELLED_ALIKE:
            left = [f"{rel}:{name}" for rel, name in where if (rel, name) not in PENDING]
            if len({r.split(":")[0] for r in left}) > 1:
                wrong.append(f"{value} defined in {', '.join(left)}")
    assert not wrong, "\n".join(wrong)


def test_the_scan_sees_a_copy() -> None:
    """The columns of the schema are found where they are defined (the scan works)."""
    found = _constants()
    assert ("core/schema.py", "SURVEY_ID") in found[repr("survey_id")]
