"""On-demand DynamoDB prices, dated, and the arithmetic from counted requests to dollars.

The prices are those of the Standard table class in us-east-1 on the AWS pricing page
for on-demand capacity, as they stand since the on-demand throughput price cut of
November 2024 (effective 2024-11-01). They were taken on PRICES_TAKEN_ON, from
secondary sources that quote the page (this lab's machines cannot reach aws.amazon.com).
Prices change and differ by region: check the current page before you quote a number.
"""

from __future__ import annotations

from collections.abc import Mapping

SOURCE = "https://aws.amazon.com/dynamodb/pricing/on-demand/"
PRICES_TAKEN_ON = "2026-11-29"
REGION = "us-east-1"
TABLE_CLASS = "Standard"
USD_PER_MILLION_WRITE_UNITS = 0.625
USD_PER_MILLION_READ_UNITS = 0.125

# (read, write) request units per request, for items within one unit (1 KB written, 4 KB
# read): every item the lab's handlers touch is a few hundred bytes. A conditional write
# whose condition fails is still billed as a write, so refused claims cost as much as
# granted ones. Every read in the lab's handlers is strongly consistent
# (ConsistentRead=True), because an idempotency check that may read a stale "no record"
# is no check: 1 unit, not 0.5.
# A transactional write costs 2 units per item. The counter sees requests, not items: the
# only transaction in the lab (the card processor's) writes 2 items, its key and its ledger entry.
TRANSACTION_WRITE_UNITS_PER_ITEM, ITEMS_PER_TRANSACTION = 2, 2
UNITS_PER_REQUEST = {
    "GetItem": (1, 0),
    "PutItem": (0, 1),
    "UpdateItem": (0, 1),
    "DeleteItem": (0, 1),
    "TransactWriteItems": (0, ITEMS_PER_TRANSACTION * TRANSACTION_WRITE_UNITS_PER_ITEM),
}


class UnpricedAction(ValueError):
    """A counted action whose request units depend on data the counter does not see."""


def request_units(calls: Mapping[str, float]) -> tuple[float, float]:
    """(read units, write units) for ``calls`` (requests by action, per invocation or in total)."""
    unpriced = [action for action, count in calls.items() if count and action not in UNITS_PER_REQUEST]
    if unpriced:  # Query and Scan are billed by the bytes they read: refuse to guess.
        raise UnpricedAction(f"no unit price for {unpriced[0]}; add it to idemlab/bench/prices.py with its reason")
    return tuple(sum(count * UNITS_PER_REQUEST[action][i] for action, count in calls.items() if count) for i in (0, 1))


def usd_per_million_invocations(calls_per_invocation: Mapping[str, float]) -> float:
    """What a million invocations making ``calls_per_invocation`` pay DynamoDB, on demand."""
    reads, writes = request_units(calls_per_invocation)
    return reads * USD_PER_MILLION_READ_UNITS + writes * USD_PER_MILLION_WRITE_UNITS


def citation() -> str:
    write, read, where = USD_PER_MILLION_WRITE_UNITS, USD_PER_MILLION_READ_UNITS, f"{TABLE_CLASS} table class, {REGION}"
    taken = f"({SOURCE}, taken {PRICES_TAKEN_ON}; check the current page)"
    return f"on-demand, {where}: ${write} per million write units, ${read} per million read units {taken}"


# What a deployed stack costs while idle (idemlab/workshop.py prints it per participant).
# us-east-1 list prices before free tiers, taken on PRICES_TAKEN_ON from secondary sources
# that quote the pages named in IDLE_SOURCES (this lab's machines cannot reach aws.amazon.com).
HOURS_PER_MONTH = 730  # how AWS prorates a monthly price by the hour
MINUTES_PER_MONTH = HOURS_PER_MONTH * 60
CLOUDWATCH_USD_PER_ALARM_MONTH = 0.10  # a standard-resolution metric alarm
CLOUDWATCH_USD_PER_METRIC_MONTH = 0.30  # a custom metric, first 10,000
SQS_USD_PER_MILLION_REQUESTS = 0.40  # standard queues, after the first million a month
LAMBDA_USD_PER_MILLION_REQUESTS = 0.20
SWEEPER_PERIOD_MINUTES = 5  # the module's sweeper_schedule_expression default, rate(5 minutes)
# An idle SQS event source mapping keeps long-polling its queue: each ReceiveMessage waits up
# to 20 s, so one poller makes 3 a minute; Lambda runs several pollers per mapping and does not
# document how many stay on an idle queue. Five (the number it starts with) is an estimate.
IDLE_RECEIVES_PER_MAPPING_PER_MINUTE = 5 * 3
LAMBDA_USD_PER_GB_SECOND = 0.0000166667  # x86, the first 6 billion GB-seconds a month
# One sweeper run: its memory (the module's lambda_memory_mb default) for an estimated second
# (a few DynamoDB queries and one PutMetricData call; not measured on AWS).
SWEEPER_GB_SECONDS_PER_RUN = 256 / 1024 * 1.0
CLOUDWATCH_USD_PER_THOUSAND_PUTMETRICDATA = 0.01  # API requests, PutMetricData among them
XRAY_USD_PER_MILLION_TRACES = 5.00  # traces recorded, after the first 100,000 a month
KMS_USD_PER_TEN_THOUSAND_REQUESTS = 0.03  # symmetric requests, after the first 20,000 a month
# DynamoDB asks KMS for a table's key when the table is read after its cached key expired; the
# sweeper reads deletion_requests on each run, so an estimate of one KMS request per run.
KMS_REQUESTS_PER_SWEEPER_RUN = 1
IDLE_SOURCES = (
    "https://aws.amazon.com/cloudwatch/pricing/, https://aws.amazon.com/sqs/pricing/, "
    "https://aws.amazon.com/lambda/pricing/, https://aws.amazon.com/xray/pricing/, "
    f"https://aws.amazon.com/kms/pricing/ (taken {PRICES_TAKEN_ON}; check the current pages)"
)

# Lesson 09: what a deletion costs as a durable function against the Scheduler version of
# lessons 03-04 (idemlab.lessons.durable). us-east-1 list prices before free tiers, taken on
# DURABLE_PRICES_TAKEN_ON from secondary sources that quote the pages in DURABLE_SOURCES
# (this lab's machines cannot reach aws.amazon.com); Step Functions' price from a stored copy
# of its page.
DURABLE_PRICES_TAKEN_ON = "2026-12-07"
LAMBDA_DURABLE_USD_PER_MILLION_OPERATIONS = 8.00  # a start, a step, a wait: each one operation
LAMBDA_DURABLE_USD_PER_GB_WRITTEN = 0.25  # data a durable operation checkpoints
LAMBDA_DURABLE_USD_PER_GB_MONTH = 0.15  # checkpointed data kept, for the execution's life and its retention
STEP_FUNCTIONS_USD_PER_THOUSAND_TRANSITIONS = 0.025  # Standard workflows, retries included
SCHEDULER_USD_PER_MILLION_INVOCATIONS = 1.00  # after the first 14 million a month
DURABLE_SOURCES = (
    "https://aws.amazon.com/lambda/pricing/, https://aws.amazon.com/step-functions/pricing/, "
    f"https://aws.amazon.com/eventbridge/pricing/ (taken {DURABLE_PRICES_TAKEN_ON}; check the current pages)"
)
