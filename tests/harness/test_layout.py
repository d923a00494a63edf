"""The tests are laid out like the code (docs/DESIGN.md, the `tests/` rows): no test file at
the top of tests/, every folder named in the design, and the suite's lists of files naming
files that exist. Needs no server: it reads the tree. That every `tests/lessons/<slug>/` is
a lesson is checked with the lesson's other places, in test_lesson_parts.py, and that the
Makefile names no test file, there too."""

from __future__ import annotations

import pytest

from idemlab import settings
from support.scheduling import SEED_FILE, SPLIT_BY_TEST, measured
from tests.conftest import WITHOUT_STACK

TESTS = settings.ROOT / "tests"
DESIGN = settings.ROOT / "docs" / "DESIGN.md"
# Folders whose file names are unique in the suite, kept as modules of their own (no
# `__init__.py`): the conformance suite and the LocalStack stage.
UNPACKAGED = {"conformance", "localstack"}


def folders_with_tests() -> list[str]:
    """Every folder under tests/ that holds a test file, as a path under tests/."""
    return sorted({str(path.parent.relative_to(TESTS)) for path in TESTS.rglob("test_*.py")} - {"."})


def test_no_test_file_sits_at_the_top_of_tests():
    strays = sorted(path.name for path in TESTS.glob("*.py") if path.name != "conftest.py")
    assert not strays, f"move these into the folder of the code they test (docs/DESIGN.md, Layout): {strays}"


def test_every_folder_of_tests_is_named_in_the_design():
    design = DESIGN.read_text()
    top = sorted({folder.split("/")[0] for folder in folders_with_tests()})
    unnamed = [folder for folder in top if f"`tests/{folder}/" not in design]
    assert not unnamed, f"docs/DESIGN.md's Layout names no `tests/<folder>/` row for: {unnamed}"


def test_folders_of_tests_are_packages_so_file_names_may_repeat():
    """Without an `__init__.py`, pytest imports a test file by its bare name, and a second
    `test_stack.py` in another folder stops the collection."""
    bare = [
        folder
        for folder in folders_with_tests()
        if folder.split("/")[0] not in UNPACKAGED and not (TESTS / folder / "__init__.py").is_file()
    ]
    assert not bare, f"add an __init__.py to: {bare}"


@pytest.mark.parametrize(
    "listed, names",
    [
        ("WITHOUT_STACK (tests/conftest.py)", WITHOUT_STACK),
        ("SPLIT_BY_TEST (tests/support/scheduling.py)", SPLIT_BY_TEST),
    ],
    ids=["WITHOUT_STACK", "SPLIT_BY_TEST"],
)
def test_the_suites_lists_of_files_name_files_under_tests(listed, names):
    """A name left behind by a move would drop out of the scheduling without a word."""
    missing = [name for name in names if not (TESTS / name).is_file()]
    assert not missing, f"{listed} names files that are not under tests/: {missing}"


def test_the_committed_durations_name_scopes_that_exist():
    """A fresh clone schedules by the seed: a scope it names under an old path would be
    scheduled as never measured, silently."""
    seed = measured(settings.ROOT / SEED_FILE)
    assert seed, f"{SEED_FILE} is missing or empty"
    stale = sorted(key for key in seed if not (TESTS / key.split("::", 1)[0]).is_file())
    assert not stale, f"{SEED_FILE} names files that are not under tests/: {stale}"
