"""Issue 24, item 7: the idempotent consumer's records outlive every copy of a line.

A line can wait on the work queue, then on its dead-letter queue, and come back by a
redrive with a fresh retention. The record of its reservation must still be there when
it does, or the redriven copy reserves again (lesson 7). Checked against the deployed
queues' retention, read back from SQS, and against SQS's own limit.
"""

from __future__ import annotations

import pytest

from idemlab import clients, lambda_code, settings

pytestmark = pytest.mark.stack

FUNCTIONS = settings.ROOT / "functions" / "queues"
SQS_RETENTION_LIMIT_SECONDS = 1209600  # 14 days, SetQueueAttributes' MessageRetentionPeriod maximum


def retention(queue_url: str) -> int:
    attributes = clients.client("sqs").get_queue_attributes(
        QueueUrl=queue_url, AttributeNames=["MessageRetentionPeriod"]
    )
    return int(attributes["Attributes"]["MessageRetentionPeriod"])


def record_seconds(monkeypatch) -> int:
    monkeypatch.setenv("ORDER_IDEMPOTENCY_TABLE", "not-used-by-this-check")
    consumer = lambda_code.load(FUNCTIONS, "fulfil_idempotent")
    return consumer.config.expires_after_seconds


def test_the_idempotency_record_outlives_the_queue_the_dlq_and_a_redrive(stack, monkeypatch):
    work, dead = retention(stack["queues"]["orders"]), retention(stack["queues"]["orders_dlq"])
    lifetime = record_seconds(monkeypatch)
    # Waited on the queue, then on the DLQ, then redriven as a new message.
    assert lifetime > work + dead + work, (
        f"records kept {lifetime} s; a line can come back after {work + dead + work} s"
    )
    # And whatever the queues are set to: no queue keeps a message longer than SQS's limit.
    assert lifetime > 3 * SQS_RETENTION_LIMIT_SECONDS
