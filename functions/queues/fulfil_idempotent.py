"""The idempotent consumer: one reservation per order line, however often it arrives.

Powertools' batch processor runs each record on its own and reports the ones that
failed in `batchItemFailures`, so only those come back (the mapping has
ReportBatchItemFailures). Its idempotency utility claims each reservation by the
business key, order id and line, before reserving: a line delivered again, or sent
again by a producer that retried, finds the claim and returns the stored result. The
claim lapses with the invocation that took it, so the key also goes on to the
reservation itself (fulfilment/stock.py): a copy that died after reserving, before
Powertools recorded it, leaves a claim that the next delivery outlives, and that
delivery finds the reservation already made.
"""

from __future__ import annotations

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, IdempotencyConfig, idempotent_function

from fulfilment import orders, stock
from shared.settings import table

# The record must outlive every way the same line can still arrive, or a late copy
# reserves again (lesson 7). The lab's one model of the redrive horizon (idemlab/horizon.py):
# on this standard queue a dead letter keeps its first enqueue time, so it can be redriven
# at most the DLQ's retention after the first send, 14 days at most (SQS developer guide,
# "Setting-up dead-letter queue retention"; MessageRetentionPeriod in SetQueueAttributes).
# A redrive sends it back as a new message, with a new messageId and enqueue time and a
# retention that starts again (SQS developer guide, "Configure a dead-letter queue
# redrive"), so a copy that fails again after a redrive has a horizon of its own. This
# consumer allows for three horizons (the first send's and two redrives') plus a day for
# the operator to start a redrive and the consumer to drain it. Derived from SQS's limit
# rather than this stack's settings, so no queue setting can outgrow it;
# tests/lessons/queues/test_record_lifetime.py holds the deployed queues to it and
# tests/harness/test_redrive_horizon.py holds it to the lab's horizon.
SQS_MAX_RETENTION_SECONDS = 14 * 24 * 60 * 60
REDRIVE_ALLOWANCE_SECONDS = 24 * 60 * 60
RECORD_SECONDS = 3 * SQS_MAX_RETENTION_SECONDS + REDRIVE_ALLOWANCE_SECONDS

processor = BatchProcessor(event_type=EventType.SQS)
persistence = DynamoDBPersistenceLayer(table_name=table("order_idempotency"))
config = IdempotencyConfig(
    event_key_jmespath="[order_id, line]",
    # The same line with another SKU or quantity is a producer bug, not a retry.
    payload_validation_jmespath="[sku, quantity]",
    raise_on_no_idempotency_key=True,
    expires_after_seconds=RECORD_SECONDS,
)


@idempotent_function(data_keyword_argument="line", persistence_store=persistence, config=config)
def reserve_once(line: dict, message_id: str, receive_count: str) -> dict:
    order_line = orders.parse(line)
    return stock.reserve(order_line, message_id, receive_count, key=order_line.business_key)


def record_handler(record: SQSRecord) -> dict:
    line = orders.parse(record.body)  # a malformed line fails this record only
    return reserve_once(
        line=line.as_dict(), message_id=record.message_id, receive_count=record.attributes.approximate_receive_count
    )


def handler(event, context):
    # The in-progress claim expires with this invocation's time (see checkout_powertools).
    config.register_lambda_context(context)
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
