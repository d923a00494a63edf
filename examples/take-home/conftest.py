"""The tables the handlers in checkout.py, consumer.py and signup.py use, and how to count what they did."""

import uuid

import boto3
import pytest
from boto3.dynamodb.conditions import Attr


@pytest.fixture(autouse=True)
def tables(idemlab):
    """Fresh tables for each test, on the plugin's backend (deleted after the test)."""
    idemlab.make_table("orders", key="order_id")
    idemlab.make_table("charges", key="charge_id")
    idemlab.powertools_table("idempotency")
    idemlab.make_table("consumer-claims", key="key")
    idemlab.make_table("shipments", key="shipment_id")
    idemlab.make_table("signups", key="user_id")
    idemlab.make_table("bonuses", key="bonus_id")
    idemlab.make_table("emails", key="email_id")


def new_order(round_number):
    return {"order_id": f"order-{round_number}-{uuid.uuid4().hex[:8]}", "amount": 1999}


def charges_for(event):
    """How many times the card was charged for this event's order."""
    charges = boto3.resource("dynamodb").Table("charges")  # the plugin points boto3 at its backend
    scan = charges.scan(FilterExpression=Attr("order_id").eq(event["order_id"]), ConsistentRead=True)
    return scan["Count"]


def shipments_for(event):
    """How many times the order was shipped."""
    shipments = boto3.resource("dynamodb").Table("shipments")
    scan = shipments.scan(FilterExpression=Attr("order_id").eq(event["order_id"]), ConsistentRead=True)
    return scan["Count"]


def new_user(round_number):
    return {"user_id": f"user-{round_number}-{uuid.uuid4().hex[:8]}"}


def signup_effects(event):
    """Two effects, counted by name: each must be exactly 1."""
    counted = {}
    for effect, table in (("bonus", "bonuses"), ("email", "emails")):
        rows = boto3.resource("dynamodb").Table(table)
        scan = rows.scan(FilterExpression=Attr("user_id").eq(event["user_id"]), ConsistentRead=True)
        counted[effect] = scan["Count"]
    return counted
