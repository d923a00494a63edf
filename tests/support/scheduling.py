"""The order in which `make test`'s workers take the suite's scopes, from measured durations.

A scope is the scheduling unit: a test file, or one test of a SPLIT_BY_TEST file. At the
end of every run the suite writes how long each scope it ran took (setup, call and
teardown of its tests, summed) to ``.lab/test-durations.json``, merged into what earlier
runs measured; the next run hands out the longest scopes first, so that no worker starts a
long one while the others are nearly done. Scopes never measured follow in collection
order. The file is the machine's own (under .lab/, not committed): its numbers are this
machine's. A machine that has none yet (a fresh clone, CI's) schedules by SEED_FILE, a
committed copy of one such file, so its long scopes go first too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

# Relative to the rootdir (the checkout's root for the suite).
DURATIONS_FILE = Path(".lab") / "test-durations.json"
# What a fresh clone (CI's, a newcomer's) schedules by until its own first run has measured:
# the same kind of file, committed, from a `make test` run on a 2-core machine. Refresh it by
# copying a run's DURATIONS_FILE over it; only the order it gives matters, not its seconds.
SEED_FILE = Path("tests") / "support" / "durations-seed.json"

# Files whose tests are scopes of their own, as paths under tests/ (scope_key): they share
# nothing but the session's stack (the deletion stack tests' module fixture is a plain
# object), and each is long.
SPLIT_BY_TEST = (
    "lessons/test_notebooks.py",
    "lessons/deletion/test_stack.py",
    "localstack/test_notebooks_on_localstack.py",
)


def scope_of(nodeid: str) -> str:
    """The scheduling unit of a test: its file, or the test itself in a SPLIT_BY_TEST file."""
    path = nodeid.split("::", 1)[0]
    if scope_key(path) in SPLIT_BY_TEST:
        return nodeid
    return path


def scope_key(scope: str) -> str:
    """A scope's name in the durations file, WITHOUT_STACK and SPLIT_BY_TEST: its path
    relative to tests/ (``embedded/test_dynamodb.py``)."""
    return scope.split("tests/", 1)[-1]


def measured(path: Path) -> dict[str, float]:
    """Seconds per scope key from an earlier run; empty when there is none or it is unreadable."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(key): float(value) for key, value in data.items() if isinstance(value, int | float)}


def record(path: Path, durations: dict[str, float]) -> None:
    """Merge this run's seconds per scope key into the file (scopes it did not run keep theirs)."""
    merged = measured(path)
    merged.update({key: round(seconds, 2) for key, seconds in durations.items()})
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(dict(sorted(merged.items())), indent=1) + "\n")
    partial.replace(path)  # whole or not at all: a worker never reads half a file


def scheduling_order(
    nodeids: list[str],
    workers: int,
    seconds: dict[str, float],
    without_stack: Iterable[str] = (),
) -> list[str]:
    """The tests in the order the workers should take their scopes: one long ``without_stack``
    file per worker first, then the rest longest first by ``seconds`` (per scope key), scopes
    never measured last, in collection order; a scope's tests keep their order."""
    without_stack = set(without_stack)
    scopes = list(dict.fromkeys(scope_of(nodeid) for nodeid in nodeids))
    took = {scope: seconds.get(scope_key(scope), 0.0) for scope in scopes}

    def longest_first(scope: str) -> float:
        return -took[scope]

    heads = sorted((scope for scope in scopes if scope_key(scope) in without_stack), key=longest_first)[:workers]
    rest = sorted((scope for scope in scopes if scope not in heads), key=longest_first)  # stable: ties keep their order
    rank = {scope: position for position, scope in enumerate(heads + rest)}
    return sorted(nodeids, key=lambda nodeid: rank[scope_of(nodeid)])
