"""The deletion schedules' target ARN names the partition the workflow lives in, and the lab's
own Scheduler firer recognises it in any partition. Pure: no server."""

from __future__ import annotations

import pytest

from idemlab.background import targets
from idemlab.lessons import deletion

request_deletion = deletion.import_function_module("request_deletion")


@pytest.mark.parametrize("partition", ["aws", "aws-cn", "aws-us-gov"])
def test_the_start_execution_target_is_in_the_workflows_partition(partition):
    workflow = f"arn:{partition}:states:eu-west-1:123456789012:stateMachine:lab-account-deletion"
    target = request_deletion.start_execution_target(workflow)
    assert target == f"arn:{partition}:scheduler:::aws-sdk:sfn:startExecution"


@pytest.mark.parametrize("partition", ["aws", "aws-cn", "aws-us-gov"])
def test_the_firer_reads_a_universal_target_of_any_partition(partition):
    universal = targets.UNIVERSAL_TARGET.match(f"arn:{partition}:scheduler:::aws-sdk:sfn:startExecution")
    assert universal and universal.string[universal.end() :] == "sfn:startExecution"
