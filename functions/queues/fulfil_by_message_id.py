"""A deliberately wrong consumer: idempotent per SQS messageId.

It has everything the idempotent consumer has (batch processor, Powertools idempotency)
except the key. SQS gives every SendMessage a new messageId, so a producer that sends
the same order line twice (its first call timed out, it retried) creates two messages
with two ids, and this consumer reserves twice. The key must name the business
operation, not the envelope it travelled in.
"""

from __future__ import annotations

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, IdempotencyConfig, idempotent_function

from fulfilment import orders, stock
from shared.settings import table

processor = BatchProcessor(event_type=EventType.SQS)
persistence = DynamoDBPersistenceLayer(table_name=table("order_idempotency"))
config = IdempotencyConfig(
    event_key_jmespath="messageId", raise_on_no_idempotency_key=True, expires_after_seconds=24 * 60 * 60
)


@idempotent_function(data_keyword_argument="record", persistence_store=persistence, config=config)
def reserve_once(record: dict) -> dict:
    line = orders.parse(record["body"])
    return stock.reserve(line, record["messageId"], record["attributes"]["ApproximateReceiveCount"])


def record_handler(record: SQSRecord) -> dict:
    return reserve_once(record=record.raw_event)


def handler(event, context):
    config.register_lambda_context(context)
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
