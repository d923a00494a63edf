"""What a workshop of N stacks needs from an account: its quotas, checked on AWS, and what the
stacks cost while nobody uses them. Both are counted from one participant's planned resources
(``stack.planned_resources``); ``python -m idemlab.workshop up`` prints them before it deploys.
"""

from __future__ import annotations

from dataclasses import dataclass

import boto3

from idemlab import clients, settings
from idemlab.bench import prices
from idemlab.exercises import keys as keys_exercise
from idemlab.lessons import checkout, deletion

# Deletion schedules are made at run time, one per pending deletion request (notebooks 03
# and 04); the stack makes none. An upper estimate per participant, far below the default
# quota (10,000,000 a Region, Scheduler quotas page) but counted so the check names it.
SCHEDULES_PER_PARTICIPANT = 100


def lesson_peaks() -> dict[str, int]:
    """Each lesson's peak of Lambda executions at once, from the constants its races use.

    A checkout copy holds two executions (the checkout and its card processor call,
    ``checkout.EXECUTIONS_PER_COPY``), and each race leaves ``CONCURRENCY_HEADROOM`` for the
    rest of the stack (the sweeper on its schedule). Notebook 03's claim race runs one
    execution per worker. The other lessons invoke one function at a time, or run on an
    embedded backend of their own (05, 08).
    """
    per_copy, headroom = checkout.EXECUTIONS_PER_COPY, checkout.CONCURRENCY_HEADROOM
    keys_copies = max(keys_exercise.COPIES_TOGETHER, keys_exercise.HANDLER_COPIES)
    return {
        "02_checkout": checkout.RACE_COPIES * per_copy + headroom,
        "03_deletion_claims": deletion.CLAIM_RACE_WORKERS + headroom,
        "07_keys": keys_copies * per_copy + headroom,
    }


def concurrency_per_participant(lessons: list[str] | None = None) -> int:
    """A participant's peak concurrency: the highest peak of the lessons taught (None: all),
    since participants share the quota. A peak is keyed by its notebook, ``<NN>_<slug>[_<part>]``."""
    peaks = [peak for notebook, peak in lesson_peaks().items() if lessons is None or notebook.split("_")[1] in lessons]
    return max(peaks, default=1)


class QuotasTooLow(Exception):
    """The account's quotas cannot hold the workshop; the message names each quota short."""


@dataclass
class Need:
    """One account quota the workshop uses: how much of it, and where AWS keeps the quota."""

    key: str  # the QUOTAS key
    what: str
    per_participant: int
    service_code: str  # Service Quotas' code of the service
    quota_code: str | None  # None: no quota to check (see QUOTAS)
    quota_name: str


# Service Quotas codes, with the quota names the AWS quota pages give (Lambda quotas,
# IAM quotas, EventBridge Scheduler quotas). The codes were taken from public code that asks
# Service Quotas for them, not read on an AWS page (this project's machines cannot reach
# AWS): `aws service-quotas list-service-quotas --service-code <service>` shows them.
# Lambda's concurrency is read from Lambda itself (GetAccountSettings), not Service Quotas:
# where no increase was applied, Service Quotas answers only AWS's default (1,000), while a
# new account runs with a lower limit that GetAccountSettings reports.
# CloudWatch: no count quota for metric alarms could be confirmed, so none is checked (a
# match by name would find request-rate quotas such as PutMetricAlarm's, not a count).
QUOTAS = {
    "lambda_concurrency": ("lambda", "L-B99A9384", "Concurrent executions"),
    "iam_roles": ("iam", "L-FE177D64", "Roles per account"),
    "schedule_groups": ("scheduler", "L-A632CD40", "Number of schedule groups"),
    "schedules": ("scheduler", "L-EE5D6FF0", "Number of schedules"),
    "alarms": ("monitoring", None, "no count quota checked"),
}


def needs(resources: dict[str, int], lessons: list[str] | None = None) -> list[Need]:
    """What one participant's stack takes from each quota, from its planned resources and the
    lessons taught (None: all)."""

    def need(key: str, what: str, count: int) -> Need:
        service, code, name = QUOTAS[key]
        return Need(key, what, count, service, code, name)

    return [
        need(
            "lambda_concurrency",
            "Lambda concurrent executions (the lessons' peak)",
            concurrency_per_participant(lessons),
        ),
        need("iam_roles", "IAM roles", resources.get("aws_iam_role", 0)),
        need("schedule_groups", "Scheduler schedule groups", resources.get("aws_scheduler_schedule_group", 0)),
        need(
            "schedules",
            "Scheduler schedules (at run time, an upper estimate)",
            SCHEDULES_PER_PARTICIPANT if lessons is None or "deletion" in lessons else 0,
        ),
        need("alarms", "CloudWatch metric alarms", resources.get("aws_cloudwatch_metric_alarm", 0)),
    ]


@dataclass
class Account:
    """What the account holds now: each quota's current usage and its value (None: not known)."""

    usage: dict[str, int]
    quotas: dict[str, float | None]


def lambda_concurrency() -> tuple[int, int]:
    """(the account's concurrency limit, what functions without reserved concurrency may use),
    from Lambda's GetAccountSettings (Lambda API reference, GetAccountSettings)."""
    limit = clients.client("lambda").get_account_settings()["AccountLimit"]
    return limit["ConcurrentExecutions"], limit["UnreservedConcurrentExecutions"]


def current_account(backend: str) -> Account:
    """Current usage, counted by listing each service (read-only calls), and the quotas: Lambda's
    from GetAccountSettings on every backend, the others from Service Quotas on AWS only."""

    def count(service: str, operation: str, expression: str) -> int:
        found = clients.client(service).get_paginator(operation).paginate().search(expression)
        return sum(1 for value in found if value is not None)

    limit, unreserved = lambda_concurrency()
    usage = {
        "lambda_concurrency": limit - unreserved,  # reserved by functions already in the account
        "iam_roles": count("iam", "list_roles", "Roles[].RoleName"),
        "schedule_groups": count("scheduler", "list_schedule_groups", "ScheduleGroups[].Name"),
        "schedules": count("scheduler", "list_schedules", "Schedules[].Name"),
        "alarms": count("cloudwatch", "describe_alarms", "MetricAlarms[].AlarmName"),
    }
    quotas: dict[str, float | None] = dict.fromkeys(QUOTAS)
    quotas["lambda_concurrency"] = limit
    if backend == "aws":
        for item in needs({}):
            if item.quota_code and item.key != "lambda_concurrency":
                quotas[item.key] = aws_quota(item)
    return Account(usage, quotas)


def quota_check(
    backend: str, resources: dict[str, int], count: int, account: Account, lessons: list[str] | None = None
) -> list[str]:
    """Lines of the pre-check: each need times ``count``, beside what the account already uses
    and its quota; QuotasTooLow when the need and the usage together pass a quota."""
    lines = [f"pre-check: {count} participant(s), {sum(resources.values())} resources per stack"]
    if backend != "aws":
        lines.append(f"  (on {backend} only Lambda's concurrency has a quota; Service Quotas is AWS-only)")
    problems = []
    for item in needs(resources, lessons):
        total = item.per_participant * count
        code = item.quota_code or item.quota_name
        used = account.usage.get(item.key, 0)
        line = f"  {item.what}: {item.per_participant} x {count} = {total}, in use {used}"
        value = account.quotas.get(item.key)
        if value is not None:
            line += f", quota {value:g}"
            if total + used > value:
                problems.append(
                    f"{item.what}: the workshop needs {total}, {used} are in use, the account's quota is {value:g}"
                )
        elif backend == "aws" and item.quota_code:
            line += ", quota: not found in Service Quotas"
        lines.append(f"{line}  [{item.service_code} {code}]")
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
    sweeper's custom metric, its runs (requests, duration, PutMetricData, traces, the KMS
    requests of its table reads), and the pollers of the idle event source mappings.
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
        CostLine(
            "Lambda duration of the sweeper's runs",
            sweeper_runs * prices.SWEEPER_GB_SECONDS_PER_RUN,
            prices.LAMBDA_USD_PER_GB_SECOND,
            "per GB-second (estimate: 1 s a run)",
        ),
        CostLine(
            "CloudWatch PutMetricData of the sweeper (one a run)",
            sweeper_runs / 1e3,
            prices.CLOUDWATCH_USD_PER_THOUSAND_PUTMETRICDATA,
            "per thousand requests",
        ),
        CostLine(
            "X-Ray traces of the sweeper (active tracing, one a run)",
            sweeper_runs / 1e6,
            prices.XRAY_USD_PER_MILLION_TRACES,
            "per million traces",
        ),
        CostLine(
            "KMS requests on aws/dynamodb (the sweeper's reads)",
            sweeper_runs * prices.KMS_REQUESTS_PER_SWEEPER_RUN / 1e4,
            prices.KMS_USD_PER_TEN_THOUSAND_REQUESTS,
            "per 10,000 requests (estimate)",
        ),
    ]


def _price(usd: float) -> str:
    """Cents as cents ($0.10), and a fraction of a cent with its digits ($0.0000166667)."""
    return f"{usd:.2f}" if usd >= 0.01 else f"{usd:.10f}".rstrip("0")


def cost_lines(resources: dict[str, int], count: int) -> list[str]:
    lines = ["idle cost of one participant's stack (list prices, us-east-1, before free tiers):"]
    total = 0.0
    for line in idle_cost(resources):
        total += line.usd_per_hour
        each = _price(line.usd_per_month_each)
        lines.append(f"  {line.item}: {line.count:g} x ${each} {line.basis} = ${line.usd_per_hour:.5f}/h")
    lines.append(f"  per participant: ${total:.4f} per hour, ${total * 24:.3f} per day")
    lines.append(f"  {count} participant(s): ${total * count:.4f} per hour, ${total * 24 * count:.3f} per day")
    lines.append("  plus what the notebooks use (cents per participant per day: docs/aws.md)")
    lines.append(f"  prices: {prices.IDLE_SOURCES}")
    return lines
