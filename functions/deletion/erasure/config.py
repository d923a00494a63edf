"""Limits of the account-deletion functions, from the environment Terraform sets.

Read at call time, not import time, so a test (or a warm Lambda environment) sees the
values of the moment. Table, function and queue names come through ``shared.settings``.
"""

from __future__ import annotations

import os

from shared import clients, settings

# A claim must outlast the slowest step with all its retries (a 30 s step timeout,
# tried 3 times with backoff, is about 100 s) so a live worker never loses it between
# two progress writes, each of which renews it; and it must be short enough that a
# vanished worker's request is handed on within minutes. Terraform passes 300.
DEFAULT_LEASE_SECONDS = 300

# Claims of one request before it is FAILED and goes to the dead-letter queue: enough
# to ride out a crash and a transient outage, few enough that a request that fails for
# a reason no retry can fix reaches a human the same hour.
DEFAULT_MAX_ATTEMPTS = 3

# How long a RETRYABLE request waits before the sweeper restarts it: time for a
# transient outage to pass. The sweeper runs every few minutes, so this is a minimum.
DEFAULT_RETRY_DELAY_SECONDS = 60

# 30 days between the request and the deletion: the grace period in which a user can
# change their mind. The workshop sets seconds through DELETION_DELAY_SECONDS.
DEFAULT_DELAY_SECONDS = 30 * 24 * 3600
MAX_DELAY_SECONDS = 365 * 24 * 3600  # Scheduler accepts any date; a year guards typos

# How long after its due time a request may stay SCHEDULED before the sweeper starts it
# itself: Scheduler normally starts the workflow within a minute, and retries a failed
# start for a few minutes (SCHEDULE_MAX_RETRY_ATTEMPTS with backoff). A restart that
# races a late delivery is harmless: both claim, one wins.
DEFAULT_SCHEDULE_GRACE_SECONDS = 300

METRIC_NAMESPACE = "IdempotencyLab"
STUCK_METRIC_NAME = "StuckDeletionRequests"  # Terraform passes its own name too


def number(variable: str, default: int) -> int:
    raw = os.environ.get(variable)
    if raw is None or raw == "":
        return default
    value = int(raw)
    if value < 0:
        raise RuntimeError(f"{variable}={raw} must not be negative")
    return value


def lease_seconds() -> int:
    return number("LEASE_SECONDS", DEFAULT_LEASE_SECONDS)


def max_attempts() -> int:
    return number("MAX_ATTEMPTS", DEFAULT_MAX_ATTEMPTS)


def retry_delay_seconds() -> int:
    return number("RETRY_DELAY_SECONDS", DEFAULT_RETRY_DELAY_SECONDS)


def schedule_grace_seconds() -> int:
    return number("SCHEDULE_GRACE_SECONDS", DEFAULT_SCHEDULE_GRACE_SECONDS)


def state_machine_arn() -> str:
    """The workflow's ARN (Terraform's ``starts`` convention: ``<KEY>_STATE_MACHINE_ARN``)."""
    return settings.required("ACCOUNT_DELETION_STATE_MACHINE_ARN")


def transact_write(items: list[dict]) -> None:
    """TransactWriteItems through the resource's client, which serialises Python values;
    each action's condition must already be written out (erasure.claims.with_condition)."""
    clients.dynamodb().meta.client.transact_write_items(TransactItems=items)
