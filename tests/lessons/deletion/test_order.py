"""The deletion steps' order has one owner, ``erasure.state.STEPS``: the workflow's ASL
and the naive worker are held to it."""

from __future__ import annotations

import copy
import re

from idemlab import module_spec
from idemlab.lessons.deletion import import_function_module

state = import_function_module("erasure.state")
naive = import_function_module("naive_deletion_worker")
ASL = module_spec.workflows()["account_deletion"]


def task_order(asl: dict) -> list[str]:
    """The functions the workflow's happy path calls, in order: from StartAt, through each
    Task's Next, and at a Choice to the first state it may go to that is a Task not yet
    run (a paged step's loop back to itself is not a new step)."""
    order, name = [], asl["StartAt"]
    while name is not None:
        spec = asl["States"][name]
        if spec["Type"] == "Task":
            order.append(re.fullmatch(r"\$\{(\w+)_arn\}", spec["Resource"]).group(1))
            name = spec.get("Next")
        elif spec["Type"] == "Choice":
            targets = [c["Next"] for c in spec["Choices"]] + [spec.get("Default")]
            name = next(
                (t for t in targets if t and asl["States"][t]["Type"] == "Task" and t not in _visited(asl, order)), None
            )
        else:
            name = None
    return order


def _visited(asl: dict, order: list[str]) -> set[str]:
    return {
        n for n, s in asl["States"].items() if s["Type"] == "Task" and s["Resource"] in {f"${{{f}_arn}}" for f in order}
    }


def test_the_workflow_runs_the_claim_then_the_steps_in_the_order_of_STEPS_then_completes():
    assert task_order(ASL) == ["claim_deletion", *state.STEPS, "complete_deletion"]


def test_the_order_check_notices_two_steps_swapped_in_the_asl():
    swapped = copy.deepcopy(ASL)
    states = swapped["States"]
    states["DeleteIdentity"]["Resource"], states["SendGoodbye"]["Resource"] = (
        states["SendGoodbye"]["Resource"],
        states["DeleteIdentity"]["Resource"],
    )
    assert task_order(swapped) != ["claim_deletion", *state.STEPS, "complete_deletion"]


def test_the_naive_worker_has_one_effect_per_step_and_no_order_of_its_own():
    assert list(naive.EFFECTS) != [] and set(naive.EFFECTS) == set(state.STEPS)


def test_no_deletion_module_keeps_a_step_order_for_the_harness():
    steps = import_function_module("erasure.steps")
    assert not hasattr(steps, "NEXT_AFTER") and not hasattr(steps, "next_after")


def test_every_error_the_workflow_matches_is_a_deletion_error_class():
    """Step Functions matches a Lambda failure by its class name (errorType): an error class
    renamed without its Retry or Catch would silently retry, or fail, what it should not."""
    errors = import_function_module("erasure.errors")
    defined = {name for name, value in vars(errors).items() if isinstance(value, type) and issubclass(value, Exception)}
    matched = {
        name
        for spec in ASL["States"].values()
        for rule in spec.get("Retry", []) + spec.get("Catch", [])
        for name in rule["ErrorEquals"]
        if not name.startswith("States.")
    }
    assert matched and matched <= defined, sorted(matched - defined)
