"""Two ways to write an SQS consumer that ships each order once.

Lambda hands the consumer a batch of messages (event["Records"]); a producer that sends
one order twice makes two messages, with two message ids.
"""

import json
import uuid

import boto3

dynamodb = boto3.resource("dynamodb")
claims = dynamodb.Table("consumer-claims")
shipments = dynamodb.Table("shipments")


def ship(order_id: str) -> None:
    """The warehouse (a fake one): every call ships the order again, recorded in `shipments`."""
    shipments.put_item(Item={"shipment_id": f"sh_{uuid.uuid4().hex}", "order_id": order_id})


def claim(key: str) -> bool:
    """One conditional write: True for the first caller with this key, False for any later one."""
    try:
        claims.put_item(Item={"key": key}, ConditionExpression="attribute_not_exists(#key)",
                        ExpressionAttributeNames={"#key": "key"})
    except claims.meta.client.exceptions.ConditionalCheckFailedException:
        return False
    return True


def by_message_id(event, context):
    """Remembers the messages it has handled: a second message for the same order ships it again."""
    for record in event["Records"]:
        if claim(record["messageId"]):
            ship(json.loads(record["body"])["order_id"])


def by_order_id(event, context):
    """Claims the order itself: however many messages carry it, it ships once."""
    for record in event["Records"]:
        order_id = json.loads(record["body"])["order_id"]
        if claim(order_id):
            ship(order_id)
