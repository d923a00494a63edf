"""Every lesson has each of its parts, under one name: the list of parts is docs/DESIGN.md's
"Adding a lesson" checklist, and this file checks both that the checklist names each part
and that each lesson has it. Needs no server: it reads the tree.

A lesson is named by its notebook: ``notebooks/<NN>_<slug>.ipynb`` (a lesson told over two
notebooks adds a part name, ``03_deletion_claims`` and ``04_deletion_recovery``), and the
slug is its name in every other place. Nothing maps one name to another, so a folder,
module or test file under another name fails here.
"""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

import pytest

from idemlab import build, module_spec, settings

ROOT = settings.ROOT
DESIGN = ROOT / "docs" / "DESIGN.md"
# The checklist's paths, in its order: each line of the checklist starts with one.
PARTS = (
    "notebooks/<NN>_<slug>.ipynb",
    "functions/<slug>/",
    "terraform/modules/idempotency_lab/variables.tf",
    "terraform/modules/idempotency_lab/README.md",
    "idemlab/lessons/<slug>.py",
    "idemlab/exercises/<slug>.py",
    "tests/lessons/<slug>/",
    "tests/support/suite_timeouts.py",
    "docs/DESIGN.md",
    "README.md",
)
# Lessons that read rather than build: notebook 00 reads each service's guarantee, notebook
# 05 runs the bench (idemlab/bench, tests/harness/test_bench_*.py). Neither has code of its own to
# make idempotent, so neither has an exercise.
READING = {"guarantee", "cost"}
# The capstone's plumbing is the take-home plugin (idemlab/testing), which its checker
# (idemlab/exercises/capstone.py) drives: it has an exercise but no lesson module.
PLUGIN_DRIVEN = {"capstone"}
NOTEBOOK = re.compile(r"^(?P<number>\d\d)_(?P<slug>[a-z]+)(?:_[a-z_]+)?$")


def notebooks() -> dict[str, list[Path]]:
    """Each lesson's notebooks, by slug."""
    lessons: dict[str, list[Path]] = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        match = NOTEBOOK.match(path.stem)
        assert match, f"{path.name} is not named <NN>_<slug>[_<part>].ipynb"
        lessons.setdefault(match["slug"], []).append(path)
    return lessons


def modules(folder: str) -> set[str]:
    """The module names of idemlab/<folder>/ (lessons, exercises), without the package's own."""
    return {path.stem for path in (ROOT / "idemlab" / folder).glob("*.py") if path.stem != "__init__"}


def folders(parent: Path) -> set[str]:
    """The names of the folders in ``parent``, without Python's caches."""
    return {path.name for path in parent.iterdir() if path.is_dir() and not path.name.startswith(("_", "."))}


def checklist() -> list[str]:
    """The paths the checklist of docs/DESIGN.md names, one per item, in order."""
    text = DESIGN.read_text()
    section = text.split("## Adding a lesson", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\d+\. `([^`]+)`", section, flags=re.MULTILINE)


def declared_functions() -> dict[str, dict]:
    return module_spec.default("functions")


def test_the_checklist_in_design_names_every_part_in_order():
    assert checklist() == list(PARTS)


def test_notebook_numbers_are_one_sequence():
    numbers = sorted(int(path.name[:2]) for path in (ROOT / "notebooks").glob("*.ipynb"))
    assert numbers == list(range(len(numbers)))


# A lesson whose parts land over several merges, each kept green (docs/DESIGN.md, "Lesson 09
# in progress"): the parts it may still lack, each by the start of what the check below says is
# missing. Each must still be missing: once a part lands, its entry goes, and with the last
# one the lesson's.
IN_PROGRESS = {
    "durable": {
        'variable "functions" entries with lesson = "durable"': "issue 39: the module's rows for the durable functions",
        "variable \"queues\" entry for local.lesson_dlq['durable']": "issue 39: the lesson's dead-letter queue in the module",
    }
}


def test_a_lesson_in_progress_lacks_exactly_the_parts_it_names():
    """A part named here that has landed makes the entry stale: take it out."""
    for slug, parts in IN_PROGRESS.items():
        assert slug in notebooks(), f"{slug}: IN_PROGRESS names a lesson without a notebook"
        landed = sorted(part for part in parts if not any(m.startswith(part) for m in missing_parts(slug)))
        assert not landed, f"{slug}: these parts have landed; take them out of IN_PROGRESS: {landed}"


@pytest.mark.parametrize(
    "place, names",
    [
        (
            "functions/ (beside the shared package every zip bundles)",
            lambda: set(build.lessons()),
        ),
        ("idemlab/lessons/", lambda: modules("lessons")),
        ("idemlab/exercises/", lambda: {name.split("_")[0] for name in modules("exercises")}),
        ('the lessons of variable "functions"', lambda: {entry["lesson"] for entry in declared_functions().values()}),
        ("tests/lessons/", lambda: folders(ROOT / "tests" / "lessons")),
    ],
)
def test_every_name_in_each_place_is_a_lesson_slug(place, names):
    strays = sorted(names() - set(notebooks()) - set(IN_PROGRESS))
    assert not strays, f"{place} has names no notebook carries: {strays} (lessons: {sorted(notebooks())})"


@pytest.mark.parametrize("slug", sorted(notebooks()))
def test_every_lesson_has_each_part(slug):
    allowed = IN_PROGRESS.get(slug, {})
    missing = [part for part in missing_parts(slug) if not any(part.startswith(a) for a in allowed)]
    assert not missing, f"lesson {slug} lacks: {missing}"


def missing_parts(slug: str) -> list[str]:
    """What lesson ``slug`` lacks of the checklist's parts, each said as what is missing."""
    missing = []
    texts = {path.name: path.read_text() for path in notebooks()[slug]}
    code = ROOT / "functions" / slug
    if code.is_dir():
        handlers = sorted(path.stem for path in code.glob("*.py"))
        if not any("naive" in name for name in handlers) or len(handlers) < 2:
            missing.append(f"functions/{slug}/ with a naive and an idempotent handler (has {handlers})")
        declared = declared_functions()
        keys = sorted(key for key, entry in declared.items() if entry["lesson"] == slug)
        if not keys:
            missing.append(f'variable "functions" entries with lesson = "{slug}"')
        for key in keys:
            handler_module = declared[key].get("handler", f"{key}.handler").rsplit(".", 1)[0]
            if handler_module not in handlers:
                missing.append(f"functions/{slug}/{handler_module}.py (the handler of {key})")
        tables = module_spec.default("tables")
        used = {table for key in keys for table in declared[key].get("tables", {})}
        missing += [f'variable "tables" entry {table!r}' for table in sorted(used - set(tables))]
        dead_letters = module_spec.local_value("lesson_dlq").get(slug)
        if dead_letters not in module_spec.default("queues"):
            missing.append(f'variable "queues" entry for local.lesson_dlq[{slug!r}] (names {dead_letters!r})')
    if slug not in READING:
        if slug not in PLUGIN_DRIVEN and not (ROOT / "idemlab" / "lessons" / f"{slug}.py").exists():
            missing.append(f"idemlab/lessons/{slug}.py")
        exercise = ROOT / "idemlab" / "exercises" / f"{slug}.py"
        # The capstone's checker is a plain `check(path)`: the learner hands it a file.
        wanted = "def check(" if slug in PLUGIN_DRIVEN else "Exercise("
        if not exercise.exists() or wanted not in exercise.read_text():
            missing.append(f"idemlab/exercises/{slug}.py defining {wanted!r}")
        for name, text in texts.items():
            if slug not in PLUGIN_DRIVEN and f"idemlab.lessons import {slug}" not in text:
                missing.append(f"notebooks/{name} importing idemlab.lessons.{slug}")
            if f"idemlab.exercises import {slug}" not in text:
                missing.append(f"notebooks/{name} importing idemlab.exercises.{slug}")
        if not list((ROOT / "tests" / "lessons" / slug).glob("test_*.py")):
            missing.append(f"tests/lessons/{slug}/ with its tests")
    if code.is_dir():
        design = DESIGN.read_text()
        missing += [f"docs/DESIGN.md naming function key `{key}`" for key in keys if f"`{key}`" not in design]
    readme = (ROOT / "README.md").read_text()
    missing += [f"README.md naming notebook {Path(name).stem}" for name in texts if Path(name).stem not in readme]
    return missing


def test_the_makefile_names_no_test_file():
    """Which tests a stage runs is said where the tests are, by a marker (`any_backend`), so
    a test moved or added is never left out of a list kept elsewhere."""
    recipes = [line for line in (ROOT / "Makefile").read_text().splitlines() if line.startswith("\t")]
    assert not [line for line in recipes if re.search(r"tests/\S+\.py", line)]


def _builtin_exception(name: str) -> bool:
    value = getattr(builtins, name, None)
    return isinstance(value, type) and issubclass(value, BaseException)


def error_classes() -> dict[str, str]:
    """Every exception class the Lambda code defines (subclassing a built-in exception or
    another such class, wherever it is defined), with the file that defines it."""
    classes = {}
    for path in sorted((ROOT / "functions").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = [
                    base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "") for base in node.bases
                ]
                classes[node.name] = (bases, path.relative_to(ROOT).as_posix())
    errors: dict[str, str] = {}
    while found := {
        name: where
        for name, (bases, where) in classes.items()
        if name not in errors and any(base in errors or _builtin_exception(base) for base in bases)
    }:
        errors |= found
    return errors


def test_every_error_class_of_the_lambda_code_ends_in_error():
    """One suffix, as PEP 8 names exceptions: a learner reads `ClaimLostError` in a workflow's
    Catch, a test and a Lambda error payload alike."""
    classes = error_classes()
    assert {"ConfigurationError", "CheckoutError", "DeletionError", "FulfilmentError"} <= set(classes)
    strays = sorted(f"{name} ({where})" for name, where in classes.items() if not name.endswith("Error"))
    assert not strays, f"error classes without the Error suffix: {strays}"
