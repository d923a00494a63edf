"""The course's shape, read from the notebooks as files (no server): every notebook states
the learner's time in minutes beside the machine's, asks at least two predictions and
answers each after its run, and keeps its answer keys out of a learner's "Run all"."""

from __future__ import annotations

import re

import nbformat
import pytest

from idemlab import settings
from lessons.test_notebooks import ANSWERS_NOT_RUN, NOTEBOOKS, PARAMETERS, with_parameters

PREDICTION = "**Predict, then run.**"
ANSWER = "**Answer.**"
# A cell that runs an answer key: an exercise's solution handed to its check, or the capstone's.
ANSWER_KEY = re.compile(r"\.check\(exercises\.|capstone\.ANSWER")
GUARD = "if SHOW_ANSWERS:"


def cells(path):
    return nbformat.read(path, as_version=4).cells


def time_paragraph(path) -> str:
    opening = "\n\n".join(cell.source for cell in cells(path)[:3] if cell.cell_type == "markdown")
    found = [p for p in opening.split("\n\n") if p.startswith("**Time")]
    assert len(found) == 1, f"{path.name}: {len(found)} time paragraphs in its opening"
    return found[0]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_each_notebook_states_the_learners_minutes_beside_the_machines_seconds(path):
    time = time_paragraph(path)
    assert re.search(r"\b\d+ (to \d+ )?minutes\b", time), f"{path.name}: no learner's minutes in {time!r}"
    assert re.search(r"\b\d+ (to \d+ )?s\b", time), f"{path.name}: no machine time in seconds in {time!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_each_notebook_asks_two_predictions_and_answers_each_after_its_run(path):
    marks = []  # ("predict" | "code" | "answer"), in cell order
    for cell in cells(path):
        if cell.cell_type == "code":
            marks.append("code")
            continue
        for paragraph in cell.source.split("\n\n"):
            if PREDICTION in paragraph:
                marks.append("predict")
            if paragraph.startswith(ANSWER):
                marks.append("answer")
    assert marks.count("predict") >= 2, f"{path.name}: {marks.count('predict')} predictions, wanted 2 or more"
    assert _paired(marks), f"{path.name}: each prediction needs a run, then its answer, in order: {marks}"


def _paired(marks: list[str]) -> bool:
    """Every prediction is followed by a code cell, then by an answer, predictions answered in order."""
    waiting = []  # predictions not yet answered, and whether a run came after each
    for mark in marks:
        if mark == "predict":
            waiting.append(False)
        elif mark == "code":
            waiting = [True for _ in waiting]
        elif mark == "answer":
            if not waiting or not waiting[0]:
                return False
            waiting.pop(0)
    return not waiting


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_answer_keys_run_only_when_the_learner_asks(path):
    code = [cell for cell in cells(path) if cell.cell_type == "code"]
    keys = [n for n, cell in enumerate(code) if ANSWER_KEY.search(cell.source)]
    flags = [n for n, cell in enumerate(code) if "parameters" in cell.metadata.get("tags", [])]
    if not keys:
        assert not flags, f"{path.name}: a parameters cell but no answer key"
        return
    assert len(flags) == 1, f"{path.name}: {len(flags)} cells tagged parameters, wanted one"
    assert re.search(r"^SHOW_ANSWERS = False$", code[flags[0]].source, re.M), code[flags[0]].source
    assert flags[0] < keys[0], f"{path.name}: the SHOW_ANSWERS cell comes after an answer key"
    for n in keys:
        source = code[n].source
        assert source.lstrip().startswith(GUARD) or GUARD in source.splitlines()[0], (
            f"{path.name}: unguarded {source!r}"
        )
        assert ANSWERS_NOT_RUN in source, f"{path.name}: the skipped answer key says nothing: {source!r}"


def test_ci_sets_show_answers_right_after_the_learners_flag():
    notebook = nbformat.v4.new_notebook()
    flag = nbformat.v4.new_code_cell("SHOW_ANSWERS = False", metadata={"tags": ["parameters"]})
    notebook.cells = [nbformat.v4.new_code_cell("x = 1"), flag, nbformat.v4.new_code_cell("if SHOW_ANSWERS: pass")]
    injected = with_parameters(notebook, PARAMETERS).cells
    assert [cell.source for cell in injected] == [
        "x = 1",
        "SHOW_ANSWERS = False",
        "SHOW_ANSWERS = True",
        "if SHOW_ANSWERS: pass",
    ]


# The terms issues 36 and 39 added to the glossary: each entry cites the AWS page behind it.
CITED_TERMS = (
    "Checkpoint",
    "Replay",
    "Step semantics",
    "Dispatcher",
    "Visibility timeout",
    "Event source mapping",
    "Partial batch response",
    "Execution name",
    "Payload validation",
    "In-progress expiry",
    "Sweeper / reconciliation",
    "Jitter",
)


@pytest.mark.parametrize("term", CITED_TERMS)
def test_each_new_glossary_term_cites_aws(term):
    text = (settings.ROOT / "docs" / "glossary.md").read_text()
    entry = text.split(f"**{term}.**", 1)[1].split("\n\n", 1)[0]
    assert "(https://docs.aws.amazon.com/" in entry, f"{term}: no AWS page cited"
