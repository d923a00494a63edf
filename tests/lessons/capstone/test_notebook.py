"""Notebook 08 and the glossary, read as files (no server): the course frame, the decision
guide's rows and their links, the answer key kept out of the notebook, every glossary term."""

from __future__ import annotations

import re

import nbformat
import pytest

from idemlab import settings

NOTEBOOK = settings.ROOT / "notebooks" / "08_capstone.ipynb"
GLOSSARY = settings.ROOT / "docs" / "glossary.md"
# The lessons a decision-guide row may point to, by their notebook names.
LESSON_NOTEBOOKS = {
    "00_guarantee",
    "01_vehicles",
    "02_checkout",
    "03_deletion_claims",
    "04_deletion_recovery",
    "05_cost",
    "06_queues",
    "07_keys",
    "09_durable",
}
TECHNIQUES = (
    "natural key + conditional put",
    "claim first",
    "lease + fencing token",
    "per-step progress, or one transaction",
    "pass the key downstream",
    "use it",  # a service guarantee
    "record lifetime >= redrive horizon",
    "the service already guarantees it: write nothing",
    # How to run the steps (lesson 09's rows): a durable function, a workflow, or one handler.
    "a Lambda durable function",
    "a Step Functions Standard workflow",
    "a hand-rolled claim",
)
TERMS = (
    "Idempotent",
    "At-least-once",
    "Duplicate delivery",
    "Idempotency key",
    "Natural key",
    "Conditional write",
    "Claim",
    "Lease",
    "Fencing token",
    "Zombie",
    "Recovery point",
    "Outbox",
    "Redrive",
    "Dead-letter queue",
    "Record lifetime / redrive horizon",
    "Universal target",
    "RMV",
    "VIN",
    "JMESPath",
    "Minor units",
    "Visibility timeout",
    "Event source mapping",
    "Partial batch response",
    "Execution name",
    "Payload validation",
    "In-progress expiry",
    "Sweeper / reconciliation",
    "Jitter",
)


def cells(kind: str) -> list[str]:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    return [cell.source for cell in notebook.cells if cell.cell_type == kind]


def test_the_notebook_opens_with_objectives_prerequisites_and_its_measured_time():
    opening = cells("markdown")[0]
    for part in ("**You will be able to**", "**Before this notebook:**", "**Time:**"):
        assert part in opening, f"the opening cell has no {part}"
    assert re.search(r"\d+ s measured", opening), "the time is not a measured one"


def test_every_technique_has_a_row_linked_to_the_lessons_that_showed_it():
    guide = next(text for text in cells("markdown") if text.startswith("## 1. The decision guide"))
    rows = [line for line in guide.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == len(TECHNIQUES), rows
    for technique, row in zip(TECHNIQUES, rows, strict=True):
        assert technique in row, f"row {row[:60]!r} is not about {technique!r}"
        linked = re.findall(r"\]\(([0-9a-z_]+)\.ipynb\)", row.split(" | ")[-1])
        assert linked, f"the row on {technique!r} links no lesson"
        assert set(linked) <= LESSON_NOTEBOOKS, f"the row on {technique!r} links {linked}"
    service_row = rows[TECHNIQUES.index("use it")]
    for guarantee in ("API_StartExecution.html", "FIFO-key-terms.html", "API_TransactWriteItems.html"):
        assert re.search(rf"\(https://docs\.aws\.amazon\.com/[^)]*{guarantee}\)", service_row), guarantee


def test_the_notebook_checks_the_answer_key_without_showing_it():
    code = "\n".join(cells("code"))
    assert "capstone.check(capstone.ANSWER)" in code
    for shown in ("getsource", "ANSWER.read_text", 'capstone_answer.py").read', ".solution("):
        assert shown not in code, f"a code cell shows the answer key ({shown})"
    assert "idemlab/exercises/capstone_answer.py" in cells("markdown")[-1]


@pytest.mark.parametrize("term", TERMS)
def test_the_glossary_defines_each_term(term):
    text = GLOSSARY.read_text()
    assert re.search(rf"^\*\*{re.escape(term)}( \([^)]*\))?\.\*\*", text, flags=re.MULTILINE), term


def test_the_glossary_credits_the_recovery_point_to_brandur_leach():
    text = GLOSSARY.read_text()
    entry = text.split("**Recovery point.**", 1)[1].split("\n\n", 1)[0]
    assert "Brandur Leach" in entry
    assert "Implementing Stripe-like Idempotency Keys in Postgres" in entry
    assert "https://brandur.org/idempotency-keys" in entry
