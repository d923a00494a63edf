"""The function timeouts of the stacks the test suite deploys (tests/conftest.py passes them
to Terraform as the root's `functions`), shorter than the lessons' where a test waits one out.

A crash test waits out the crashed function's timeout: the deletion matrix, notebook 04 and
the naive worker's crash test wait for these. No function gets less than the 10 s that the
lessons give most deletion steps: under a loaded 2-core runner a step's few calls have
taken several seconds, and 6 s steps timed out spuriously there (a claim three times over).
Tests read the deployed value, never these numbers.
"""

from __future__ import annotations

TEST_FUNCTION_TIMEOUTS = {
    "delete_records": 10,  # the lessons' 30 s lets one invocation delete many pages
    "delete_files": 10,  # likewise
    "naive_deletion_worker": 15,  # 60 s in the lessons: every step in one invocation
}


def suite_functions() -> dict:
    """The module's default functions with TEST_FUNCTION_TIMEOUTS: the root's `functions`."""
    from idemlab import functions

    default = functions.module_default("functions.tf", "functions")
    unknown = sorted(set(TEST_FUNCTION_TIMEOUTS) - set(default))
    if unknown:
        raise KeyError(f"TEST_FUNCTION_TIMEOUTS names functions functions.tf does not have: {unknown}")
    return {key: {**spec, "timeout": TEST_FUNCTION_TIMEOUTS.get(key, spec["timeout"])} for key, spec in default.items()}
