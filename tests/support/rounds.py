"""How many rounds a race test runs.

A test that races or repeats rounds guards a defect that shows in only some rounds.
`make test` runs the count measured to detect that defect in 99.9 % of runs (with a
floor); `make soak` (RACE_SOAK=1) runs the acceptance count. docs/DESIGN.md, "Rounds and
their power", has each count's measurement; tests/support/rounds_power.py measures.
"""

from __future__ import annotations

import os

SOAK_VARIABLE = "RACE_SOAK"
# The least `make test` runs, whatever the measurement: a test that asserts a share of
# rounds (">= 90 % raced") keeps one miss of slack, and every guard still sends ten
# independent races through the product's path.
FLOOR = 10


def rounds(measured: int, soak: int, variable: str | None = None) -> int:
    """The rounds to run.

    Parameters
    ----------
    measured
        `make test`'s count: what detects the test's defect in 99.9 % of runs, at least FLOOR.
    soak
        The acceptance count, run when RACE_SOAK=1 (`make soak`).
    variable
        An environment variable that, when set, overrides both (CHECKOUT_ROUNDS, say).

    Returns
    -------
    int
        The count for this run.
    """
    if variable and os.environ.get(variable):
        return int(os.environ[variable])
    return soak if os.environ.get(SOAK_VARIABLE) == "1" else measured
