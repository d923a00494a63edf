"""Three ways to write one Lambda handler that charges a card for an order.

Each copy of an event that reaches charge() charges the card again, like a real card
processor called without an idempotency key. The tests count those charges.
"""

import time
import uuid

import boto3
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, IdempotencyConfig, idempotent

dynamodb = boto3.resource("dynamodb")
orders = dynamodb.Table("orders")
charges = dynamodb.Table("charges")


def charge(order_id: str, amount: int) -> str:
    """The card processor (a fake one): every call is a new charge, recorded in `charges`."""
    time.sleep(0.1)  # a payment API takes a while to answer; so does this one
    charge_id = f"ch_{uuid.uuid4().hex}"
    charges.put_item(Item={"charge_id": charge_id, "order_id": order_id, "amount": amount})
    return charge_id


def handrolled(event, context):
    """Check, then act: has this order been charged? If not, charge it and record that."""
    done = orders.get_item(Key={"order_id": event["order_id"]}, ConsistentRead=True).get("Item")
    if done:
        return {"charge_id": done["charge_id"], "replayed": True}
    charge_id = charge(event["order_id"], event["amount"])
    orders.put_item(Item={"order_id": event["order_id"], "charge_id": charge_id})
    return {"charge_id": charge_id, "replayed": False}


@idempotent(
    persistence_store=DynamoDBPersistenceLayer(table_name="idempotency"),
    config=IdempotencyConfig(event_key_jmespath="order_id"),
)
def with_powertools(event, context):
    """Powertools claims the order id with one conditional write before the body runs."""
    return {"charge_id": charge(event["order_id"], event["amount"])}
