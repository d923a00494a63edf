"""The function timeouts of the stacks the test suite deploys (tests/conftest.py passes them
to Terraform as the root's `functions`, and the queues that follow from them as its
`queues`), set apart from the lessons' where a test waits one out or a loaded runner needs
more room.

A crash test waits out the crashed function's timeout: the deletion matrix, notebook 04 and
the naive worker's crash test wait for these. No function gets less than the 10 s that the
lessons give most deletion steps: under a loaded 2-core runner a step's few calls have
taken several seconds, and 6 s steps timed out spuriously there (a claim three times over).
The order consumers get more than the lessons' 2 s for the same reason: a consumer that
times out after reserving is delivered again, and one CI run saw a line reserved three
times where the queue lesson counts two. Tests read the deployed values, never these numbers.
"""

from __future__ import annotations

TEST_FUNCTION_TIMEOUTS = {
    "delete_records": 10,  # the lessons' 30 s lets one invocation delete many pages
    "delete_files": 10,  # likewise
    # 60 s in the lessons: every step in one invocation. 15 s was passed once in CI by an
    # invocation that crashed nowhere (two attempts, no goodbye email, on a loaded runner).
    "naive_deletion_worker": 30,
    "fulfil_naive": 5,  # 2 s in the lessons: a batch of ten lines, four calls each
    "fulfil_idempotent": 5,
    "fulfil_by_message_id": 5,
}
# AWS's advice, which the module checks: a mapped queue's visibility timeout is at least
# six times its function's timeout.
VISIBILITY_PER_FUNCTION_TIMEOUT = 6


def suite_functions() -> dict:
    """The module's default functions with TEST_FUNCTION_TIMEOUTS: the root's `functions`."""
    from idemlab import module_spec

    default = module_spec.default("functions")
    unknown = sorted(set(TEST_FUNCTION_TIMEOUTS) - set(default))
    if unknown:
        raise KeyError(f"TEST_FUNCTION_TIMEOUTS names functions functions.tf does not have: {unknown}")
    return {key: {**spec, "timeout": TEST_FUNCTION_TIMEOUTS.get(key, spec["timeout"])} for key, spec in default.items()}


def suite_queues() -> dict:
    """The module's default queues, each mapped one's visibility at least six times its
    function's suite timeout: the root's `queues`."""
    from idemlab import module_spec

    queues = module_spec.default("queues")
    timeouts = {key: spec["timeout"] for key, spec in suite_functions().items()}
    for source in module_spec.default("event_sources").values():
        queue = queues[source["queue"]]
        queue["visibility_seconds"] = max(
            queue.get("visibility_seconds", 60), VISIBILITY_PER_FUNCTION_TIMEOUT * timeouts[source["function"]]
        )
    return queues
