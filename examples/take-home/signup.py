"""A sign-up handler with two effects: a sign-up bonus and a welcome email.

Each call of grant_bonus() or send_welcome_email() does its effect again, as a ledger or a
mail API called without an idempotency key would. The tests count each effect by name.
"""

import uuid

import boto3

dynamodb = boto3.resource("dynamodb")
signups = dynamodb.Table("signups")
bonuses = dynamodb.Table("bonuses")
emails = dynamodb.Table("emails")


def grant_bonus(user_id: str, amount: int) -> None:
    """The ledger (a fake one): every call credits the bonus again, recorded in `bonuses`."""
    bonuses.put_item(Item={"bonus_id": f"bo_{uuid.uuid4().hex}", "user_id": user_id, "amount": amount})


def send_welcome_email(user_id: str) -> None:
    """The mail API (a fake one): every call sends the email again, recorded in `emails`."""
    emails.put_item(Item={"email_id": f"em_{uuid.uuid4().hex}", "user_id": user_id})


def naive(event, context):
    """Does both on every call: a second copy of the event pays a second bonus and sends a second email."""
    grant_bonus(event["user_id"], 500)
    send_welcome_email(event["user_id"])
    return {"user_id": event["user_id"]}


def claimed(event, context):
    """Claims the user id with one conditional write first: only the copy that wins does the effects."""
    try:
        signups.put_item(Item={"user_id": event["user_id"]}, ConditionExpression="attribute_not_exists(user_id)")
    except signups.meta.client.exceptions.ConditionalCheckFailedException:
        return {"user_id": event["user_id"], "replayed": True}
    grant_bonus(event["user_id"], 500)
    send_welcome_email(event["user_id"])
    return {"user_id": event["user_id"], "replayed": False}
