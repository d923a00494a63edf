"""Issue 24, items 4 and 5: the deletion notebooks' stories against what runs beside them.

Run the notebooks' own cells (read from the committed notebooks) in this process, with
the deployed sweeper or a leftover schedule firing in the middle, deterministically: the
moment a learner reading slowly, or stopping early, would meet.
"""

from __future__ import annotations

import contextlib

import matplotlib
import pytest

from idemlab import lessons
from idemlab.background.scheduler_firer import DEAD_LETTERED, SchedulerFirer
from idemlab.lessons import deletion
from support.notebook_cells import code_cells, index_of, run_cells

matplotlib.use("Agg")
pytestmark = pytest.mark.stack


def namespace(stack) -> dict:
    return {
        "stack": stack,
        "deletion": deletion,
        "deletions": deletion.Deletions(stack),
        "state": deletion.import_function_module("erasure.state"),
        "claims": deletion.import_function_module("erasure.claims"),
    }


def sweep_now(deletions: deletion.Deletions) -> None:
    """One run of the deployed sweeper, as its schedule runs it (a sweep that could not
    handle some other request still handled the rest)."""
    with contextlib.suppress(lessons.FunctionFailed):
        deletions.invoke("sweeper", {})


@pytest.mark.timeout(300)
def test_a_sweep_in_the_middle_of_the_zombie_story_changes_nothing(stack):
    cells = code_cells("03_deletion_claims.ipynb")
    first = index_of(cells, "zombie_request = deletion.new_request_item(stack")
    last = index_of(cells, 'final.status.value == "COMPLETED"')
    story = namespace(stack)
    run_cells(cells[first : first + 1], story)
    sweep_now(story["deletions"])
    for execution in story["deletions"].executions_of(story["zombie_request"]):
        deletion.wait_for(execution["executionArn"])
    run_cells(cells[first + 1 : last + 1], story)  # every assertion of the story still holds
    assert story["final"].fencing_token == 2


@pytest.mark.timeout(600)
def test_a_notebook_stopped_after_its_first_story_leaves_no_schedule_that_fails_later(stack):
    cells = code_cells("04_deletion_recovery.ipynb")
    connect = index_of(cells, "def new_user_and_request():")
    first_story_checked = index_of(cells, 'assert ran["DeleteRecords"] == ["succeeded"]')
    story = namespace(stack)
    run_cells(cells[connect : first_story_checked + 1], story)
    # The learner stops here. Later, every schedule its requests left fires.
    group = stack["schedule_group"]
    firer = SchedulerFirer(groups=(group,))
    outcomes = []
    for request_id in story["asked"]:
        with contextlib.suppress(LookupError):  # no schedule left: nothing to fire
            outcomes.append(firer.fire_late(f"deletion-{request_id}", group).outcome)
    assert DEAD_LETTERED not in outcomes, outcomes
