"""The Terraform stack on LocalStack 4.14.0: deployed, then planned again.

On the embedded backend and on AWS a second plan is empty (tests/terraform/test_lifecycle.py).
LocalStack 4.14.0 differs in two places, both its own; the plan must show those and nothing
else, and the strict xfail says when LocalStack stops differing.
"""

from __future__ import annotations

import re

import pytest

from idemlab import stack

# LocalStack 4.14.0's two differences in what it reads back, each with where its source says so.
ALARM_TAGS = (
    "PutMetricAlarm's Tags are dropped: the alarm is stored without them "
    "(services/cloudwatch/provider_v2.py:445-447), so Terraform adds them again with TagResource"
)
TRACING = (
    "DescribeStateMachine never returns tracingConfiguration "
    "(services/stepfunctions/backend/state_machine.py:75-85), so Terraform sets tracing again on every plan"
)


def changed_resources(plan_text: str) -> dict[str, list[str]]:
    """Each resource the plan would change, with the attribute lines it would change."""
    changes: dict[str, list[str]] = {}
    current = None
    for line in plan_text.splitlines():
        header = re.match(r"\s*# (\S+) will be (updated in-place|created|destroyed|replaced)", line)
        if header:
            current = header.group(1)
            changes[current] = []
        elif current and re.match(r"\s+[~+-] ", line) and not re.match(r"\s+[~+-] resource ", line):
            changes[current].append(line.strip())
    return changes


@pytest.fixture(scope="module")
def second_plan(deployed) -> tuple[bool, str]:
    return stack.plan()


def test_second_plan_changes_only_what_localstack_reads_back_differently(second_plan):
    _empty, text = second_plan
    changes = changed_resources(text)
    unexpected = {}
    for address, lines in changes.items():
        if ".aws_cloudwatch_metric_alarm." in address:
            allowed = [line for line in lines if not re.match(r'[~+] (tags|tags_all|"[^"]+"\s*=|})', line)]
        elif ".aws_sfn_state_machine." in address:
            allowed = [line for line in lines if not re.match(r"[~+] (tracing_configuration|enabled\s*=|})", line)]
        else:
            allowed = lines or ["(no attribute shown)"]
        if allowed:
            unexpected[address] = allowed
    assert not unexpected, f"the second plan changes more than LocalStack's known differences: {unexpected}"


@pytest.mark.xfail(strict=True, reason=f"LocalStack 4.14.0: {ALARM_TAGS}; {TRACING}")
def test_second_plan_is_empty(second_plan):
    empty, text = second_plan
    assert empty, text[-2000:]
