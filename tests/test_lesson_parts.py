"""Every lesson has each of its parts: the list of parts is docs/DESIGN.md's "Adding a
lesson" checklist, and this file checks both that the checklist names each part and that
each lesson has it. Needs no server: it reads the tree.

The lessons are the folders of functions/ (one scenario, one zip each). Their other names
differ today (lesson 4 is order_fulfilment, lessons/queues.py, exercises/lesson4.py,
notebook 06 and test_queue_*): LESSONS maps a folder to them, and a functions/ folder with
no entry fails here, so a new lesson is listed as soon as its code exists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from idemlab import functions, settings


@dataclass(frozen=True)
class Lesson:
    """A lesson's names in each place it lives."""

    modules: tuple[str, ...]  # idemlab/lessons/<module>.py
    exercises: tuple[str, ...]  # idemlab/exercises/<exercise>.py
    notebooks: tuple[str, ...]  # notebooks/<notebook>.ipynb
    tests: str  # tests/<tests>*.py


LESSONS = {
    "vehicle_registration": Lesson(("vehicles",), ("lesson1",), ("01_duplicate_inserts",), "test_vehicle_"),
    "checkout": Lesson(
        ("checkout", "traps"),
        ("lesson2", "lesson7"),
        ("02_side_effects_and_races", "07_keys_and_record_lifetime"),
        "test_checkout_",
    ),
    "account_deletion": Lesson(
        ("deletion",),
        ("lesson3",),
        ("03_claims_and_leases", "04_partial_failures_and_recovery"),
        "test_deletion_",
    ),
    "order_fulfilment": Lesson(("queues",), ("lesson4",), ("06_queues",), "test_queue_"),
}

ROOT = settings.ROOT
DESIGN = ROOT / "docs" / "DESIGN.md"
# The checklist's paths, in its order: each line of the checklist starts with one.
PARTS = (
    "functions/<scenario>/",
    "terraform/modules/idempotency_lab/functions.tf",
    "terraform/modules/idempotency_lab/tables.tf",
    "idemlab/lessons/<module>.py",
    "idemlab/exercises/lesson<N>.py",
    "notebooks/<NN>_<title>.ipynb",
    "tests/test_<prefix>_*.py",
    "docs/DESIGN.md",
    "README.md",
)


def scenarios() -> list[str]:
    return sorted(path.name for path in (ROOT / "functions").iterdir() if path.is_dir() and path.name[0] not in "._")


def checklist() -> list[str]:
    """The paths the checklist of docs/DESIGN.md names, one per item, in order."""
    text = DESIGN.read_text()
    section = text.split("## Adding a lesson", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\d+\. `([^`]+)`", section, flags=re.MULTILINE)


def function_keys(scenario: str) -> list[str]:
    declared = functions.module_default("functions.tf", "functions")
    return sorted(key for key, entry in declared.items() if entry["scenario"] == scenario)


def test_the_checklist_in_design_names_every_part_in_order():
    assert checklist() == list(PARTS)


def test_every_functions_folder_is_a_listed_lesson():
    assert scenarios() == sorted(LESSONS)


@pytest.mark.parametrize("scenario", sorted(LESSONS))
def test_every_lesson_has_each_part(scenario):
    lesson = LESSONS[scenario]
    code = ROOT / "functions" / scenario
    handlers = sorted(path.stem for path in code.glob("*.py"))
    missing = []
    # functions/<scenario>/: a naive handler beside the idempotent ones
    if not any("naive" in name for name in handlers) or len(handlers) < 2:
        missing.append(f"functions/{scenario}/ with a naive and an idempotent handler (has {handlers})")
    # functions.tf: the scenario's functions, each with its handler module in the folder
    keys = function_keys(scenario)
    if not keys:
        missing.append(f'functions.tf entries with scenario = "{scenario}"')
    declared = functions.module_default("functions.tf", "functions")
    for key in keys:
        handler_module = declared[key].get("handler", f"{key}.handler").rsplit(".", 1)[0]
        if handler_module not in handlers:
            missing.append(f"functions/{scenario}/{handler_module}.py (the handler of {key})")
    # tables.tf: every table the scenario's functions use
    tables = functions.module_default("tables.tf", "tables")
    used = {table for key in keys for table in declared[key].get("tables", {})}
    missing += [f"tables.tf entry {table!r}" for table in sorted(used - set(tables))]
    for module in lesson.modules:
        if not (ROOT / "idemlab" / "lessons" / f"{module}.py").exists():
            missing.append(f"idemlab/lessons/{module}.py")
    for exercise in lesson.exercises:
        source = ROOT / "idemlab" / "exercises" / f"{exercise}.py"
        if not source.exists() or "Exercise(" not in source.read_text():
            missing.append(f"idemlab/exercises/{exercise}.py defining an Exercise")
    for notebook in lesson.notebooks:
        path = ROOT / "notebooks" / f"{notebook}.ipynb"
        text = path.read_text() if path.exists() else ""
        if not any(f"idemlab.lessons import {module}" in text for module in lesson.modules):
            missing.append(f"notebooks/{notebook}.ipynb importing its lesson module")
        if not any(f"exercises import {exercise}" in text for exercise in lesson.exercises):
            missing.append(f"notebooks/{notebook}.ipynb importing its exercise")
    if not list((ROOT / "tests").glob(f"{lesson.tests}*.py")):
        missing.append(f"tests/{lesson.tests}*.py")
    design = DESIGN.read_text()
    missing += [f"docs/DESIGN.md naming function key `{key}`" for key in keys if f"`{key}`" not in design]
    readme = (ROOT / "README.md").read_text()
    missing += [f"README.md naming notebook {notebook}" for notebook in lesson.notebooks if notebook not in readme]
    assert not missing, f"lesson {scenario} lacks: {missing}"
