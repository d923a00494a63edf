"""The capstone's answer key (notebook 08 does not print it): a refund handler fed by SQS
that refunds and emails exactly once under every attack of `idemlab.exercises.capstone`.

What each part answers:
- the idempotency key is the refund's own id (a natural key: every copy and every redrive
  of one refund carries it), not the SQS message id, which a producer's second send changes;
- Powertools' `idempotent_function` claims the key with one conditional write before any
  effect, so a concurrent copy finds the claim and does nothing;
- the key goes on downstream to both providers, so a copy that re-runs after a crash
  between an effect and the record's completion gets the providers' first answers;
- the record lives as long as a message can still be redriven (`REDRIVE_HORIZON_SECONDS`),
  longer than the providers remember their keys;
- the payload is validated: the same refund id with another amount, currency or address
  is refused (IdempotencyValidationError), not answered with the first refund's result;
- the refund and the email are two steps, each with a record of its own: when the email
  keeps failing, Powertools deletes the email step's record at each failure, while the
  refund's, completed, stays for the horizon. A redrive days later, after the payment
  provider forgot its key, finds the refund done and only sends the email. With one
  record around both effects, that failure would delete the only record of the refund.

Each record is handled on its own and a failed one is reported in `batchItemFailures`, so
the function's event source mapping needs `ReportBatchItemFailures`; a refused record then
returns to the queue and, after `maxReceiveCount` receives, goes to the dead-letter queue
for a person to look at.
"""

import json
import os

import providers
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)

# How long after its first send a message can still be redriven: the dead-letter queue's
# retention, at its maximum of 14 days, counted from that first send for a standard queue
# (AWS docs: AWSSimpleQueueService/latest/SQSDeveloperGuide/setting-up-dead-letter-queue-retention.html).
# A redrive sends a new message (new messageId, new enqueue time), so each further redrive
# would need up to 14 days more (sqs-configure-dead-letter-queue-redrive.html). This file
# runs in Lambda and cannot import the lab: tests/harness/test_redrive_horizon.py holds it to
# idemlab/horizon.py.
REDRIVE_HORIZON_SECONDS = 14 * 24 * 60 * 60

persistence = DynamoDBPersistenceLayer(table_name=os.environ["IDEMPOTENCY_TABLE"])
config = IdempotencyConfig(
    event_key_jmespath="refund_id",
    payload_validation_jmespath="[payment_id, amount, currency, email]",
    expires_after_seconds=REDRIVE_HORIZON_SECONDS,
    raise_on_no_idempotency_key=True,
)


# Each step's record is keyed by the step's function name and the refund id: one recovery
# point per effect.
@idempotent_function(data_keyword_argument="request", persistence_store=persistence, config=config)
def refund_step(request: dict) -> dict:
    key = request["refund_id"]
    refunded = providers.refund(
        request["payment_id"], request["amount"], request["currency"], idempotency_key=f"refund-{key}"
    )
    return {"refund_id": key, "refund_ref": refunded["refund_ref"]}


@idempotent_function(data_keyword_argument="request", persistence_store=persistence, config=config)
def email_step(request: dict) -> dict:
    key = request["refund_id"]
    sent = providers.send_email(
        request["email"],
        "Your refund",
        f"We refunded {request['amount'] / 100:.2f} {request['currency']} to your card.",
        idempotency_key=f"refund-email-{key}",
    )
    return {"refund_id": key, "message_ref": sent["message_ref"]}


def issue_refund(request: dict) -> dict:
    refunded = refund_step(request=request)
    email_step(request=request)
    return refunded


def handler(event, context):
    # The in-progress claim expires with this invocation: a copy that crashed holds it no longer.
    config.register_lambda_context(context)
    failures = []
    for record in event["Records"]:
        try:
            issue_refund(request=json.loads(record["body"]))
        except Exception as exc:
            print(f"refund in message {record['messageId']} not done: {type(exc).__name__}: {exc}")
            failures.append({"itemIdentifier": record["messageId"]})
    return {"batchItemFailures": failures}
