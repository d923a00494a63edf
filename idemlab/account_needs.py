"""What a workshop of N stacks needs from an account: its quotas, checked on AWS, and what the
stacks cost while nobody uses them. Both are counted from one participant's planned resources
(``stack.planned_resources``); ``python -m idemlab.workshop up`` prints them before it deploys.
"""

from __future__ import annotations

from dataclasses import dataclass

import boto3

from idemlab import settings
from idemlab.bench import prices

# A participant's peak concurrency: notebook 02 releases COPIES = 8 checkout invocations at
# once, each calling the card processor synchronously (two executions in flight per copy,
# idemlab/lessons/checkout.py EXECUTIONS_PER_COPY), plus that lesson's headroom of 2 for the
# rest of the stack (CONCURRENCY_HEADROOM). Participants share the account's quota.
CONCURRENCY_PER_PARTICIPANT = 8 * 2 + 2
# Deletion schedules are made at run time, one per pending deletion request (notebooks 03
# and 04); the stack makes none. An upper estimate per participant, far below the default
# quota (10,000,000 a Region, Scheduler quotas page) but counted so the check names it.
SCHEDULES_PER_PARTICIPANT = 100


class QuotasTooLow(Exception):
    """The account's quotas cannot hold the workshop; the message names each quota short."""


@dataclass
class Need:
    """One account quota the workshop uses: how much of it, and where AWS keeps the quota."""

    what: str
    per_participant: int
    service_code: str  # Service Quotas' code of the service
    quota_code: str | None  # None: no quota to check (see QUOTAS)
    quota_name: str


# Service Quotas codes, with the quota names the AWS quota pages give (Lambda quotas,
# IAM quotas, EventBridge Scheduler quotas). The codes were taken from public code that asks
# Service Quotas for them, not read on an AWS page (this project's machines cannot reach
# AWS): `aws service-quotas list-service-quotas --service-code <service>` shows them.
# CloudWatch: no count quota for metric alarms could be confirmed, so none is checked (a
# match by name would find request-rate quotas such as PutMetricAlarm's, not a count).
QUOTAS = {
    "lambda_concurrency": ("lambda", "L-B99A9384", "Concurrent executions"),
    "iam_roles": ("iam", "L-FE177D64", "Roles per account"),
    "schedule_groups": ("scheduler", "L-A632CD40", "Number of schedule groups"),
    "schedules": ("scheduler", "L-EE5D6FF0", "Number of schedules"),
    "alarms": ("monitoring", None, "no count quota checked"),
}


def needs(resources: dict[str, int]) -> list[Need]:
    """What one participant's stack takes from each quota, from its planned resources."""

    def need(key: str, what: str, count: int) -> Need:
        service, code, name = QUOTAS[key]
        return Need(what, count, service, code, name)

    return [
        need(
            "lambda_concurrency",
            "Lambda concurrent executions (notebook 02's peak)",
            CONCURRENCY_PER_PARTICIPANT,
        ),
        need("iam_roles", "IAM roles", resources.get("aws_iam_role", 0)),
        need("schedule_groups", "Scheduler schedule groups", resources.get("aws_scheduler_schedule_group", 0)),
        need("schedules", "Scheduler schedules (at run time, an upper estimate)", SCHEDULES_PER_PARTICIPANT),
        need("alarms", "CloudWatch metric alarms", resources.get("aws_cloudwatch_metric_alarm", 0)),
    ]


def quota_check(backend: str, resources: dict[str, int], count: int) -> list[str]:
    """Lines of the pre-check: each need times ``count``; on AWS, against the account's quota."""
    lines = [f"pre-check: {count} participant(s), {sum(resources.values())} resources per stack"]
    quota_lookup = backend == "aws"
    if not quota_lookup:
        lines.append(f"  (on {backend} there are no account quotas: the lookup of each quota is AWS-only)")
    problems = []
    for item in needs(resources):
        total = item.per_participant * count
        code = item.quota_code or item.quota_name
        line = f"  {item.what}: {item.per_participant} x {count} = {total}  [{item.service_code} {code}]"
        if quota_lookup and item.quota_code:
            value = aws_quota(item)
            line += f"  quota {value:g}" if value is not None else "  quota: not found in Service Quotas"
            if value is not None and total > value:
                problems.append(f"{item.what}: the workshop needs {total}, the account's quota is {value:g}")
        lines.append(line)
    if problems:
        raise QuotasTooLow("the account's quotas are too low:\n  " + "\n  ".join(problems) + "\n" + "\n".join(lines))
    return lines


def aws_quota(item: Need) -> float | None:
    """The account's value of a quota (applied, else AWS's default); IAM's lives in us-east-1."""
    region = "us-east-1" if item.service_code == "iam" else settings.region()
    quotas = boto3.client("service-quotas", region_name=region)  # AWS only: no emulator endpoint
    for ask in (quotas.get_service_quota, quotas.get_aws_default_service_quota):
        try:
            return ask(ServiceCode=item.service_code, QuotaCode=item.quota_code)["Quota"]["Value"]
        except quotas.exceptions.NoSuchResourceException:
            continue
    return None


# What a stack costs while nobody uses it.


@dataclass
class CostLine:
    item: str
    count: float
    usd_per_month_each: float
    basis: str

    @property
    def usd_per_hour(self) -> float:
        return self.count * self.usd_per_month_each / prices.HOURS_PER_MONTH


def idle_cost(resources: dict[str, int]) -> list[CostLine]:
    """What one participant's stack costs per month while nobody uses it: the alarms, the
    sweeper's custom metric, its runs, and the pollers of the idle event source mappings.
    Tables, queues, functions and workflows cost nothing idle (on demand, by request)."""
    mappings = resources.get("aws_lambda_event_source_mapping", 0)
    sweeper_runs = prices.MINUTES_PER_MONTH / prices.SWEEPER_PERIOD_MINUTES
    receives = mappings * prices.IDLE_RECEIVES_PER_MAPPING_PER_MINUTE * prices.MINUTES_PER_MONTH
    return [
        CostLine(
            "CloudWatch metric alarms (standard resolution)",
            resources.get("aws_cloudwatch_metric_alarm", 0),
            prices.CLOUDWATCH_USD_PER_ALARM_MONTH,
            "per alarm-month",
        ),
        CostLine(
            "CloudWatch custom metric (the sweeper's)", 1, prices.CLOUDWATCH_USD_PER_METRIC_MONTH, "per metric-month"
        ),
        CostLine(
            f"SQS ReceiveMessage of {mappings} idle event source mappings",
            receives / 1e6,
            prices.SQS_USD_PER_MILLION_REQUESTS,
            "per million requests (estimate)",
        ),
        CostLine(
            "Lambda requests of the sweeper (every 5 minutes)",
            sweeper_runs / 1e6,
            prices.LAMBDA_USD_PER_MILLION_REQUESTS,
            "per million requests",
        ),
    ]


def cost_lines(resources: dict[str, int], count: int) -> list[str]:
    lines = ["idle cost of one participant's stack (list prices, us-east-1, before free tiers):"]
    total = 0.0
    for line in idle_cost(resources):
        total += line.usd_per_hour
        lines.append(
            f"  {line.item}: {line.count:g} x ${line.usd_per_month_each:.2f} {line.basis} = ${line.usd_per_hour:.5f}/h"
        )
    lines.append(f"  per participant: ${total:.4f} per hour, ${total * 24:.3f} per day")
    lines.append(f"  {count} participant(s): ${total * count:.4f} per hour, ${total * 24 * count:.3f} per day")
    lines.append("  plus what the notebooks use (cents per participant per day: docs/aws.md)")
    lines.append(f"  prices: {prices.IDLE_SOURCES}")
    return lines
