"""Issue 24, item 6: malformed order lines are refused, reserve nothing and reach the DLQ.

``fulfilment.orders.parse`` used ``str()`` and ``int()``: a null order id was reserved
as order ``'None'``, a list as ``"['o-1']"``, 2.9 units as 2 and ``true`` as 1. The
battery below is the malformed-queue-line part of the issue's malformed-input battery.
"""

from __future__ import annotations

import json

import pytest
from boto3.dynamodb.conditions import Attr

from idemlab import lambda_code, lessons, settings
from idemlab.lessons.queues import Orders, Scenario

pytestmark = pytest.mark.any_backend  # the LocalStack stage runs this file too

FUNCTIONS = settings.ROOT / "functions" / "queues"
orders_module = lambda_code.load(FUNCTIONS, "fulfilment.orders")
errors = lambda_code.load(FUNCTIONS, "fulfilment.errors")

GOOD = {"order_id": "o-1", "line": 1, "sku": "sku-red-mug", "quantity": 2}

# Each a line that names no real order line; every one must be refused, none converted.
MALFORMED_LINES = [
    ("null order id", {**GOOD, "order_id": None}),
    ("order id a list", {**GOOD, "order_id": ["o-1"]}),
    ("order id a number", {**GOOD, "order_id": 7}),
    ("empty order id", {**GOOD, "order_id": ""}),
    ("line a fraction", {**GOOD, "line": 1.9}),
    ("line true", {**GOOD, "line": True}),
    ("line zero", {**GOOD, "line": 0}),
    ("quantity a fraction", {**GOOD, "quantity": 2.9}),
    ("quantity true", {**GOOD, "quantity": True}),
    ("quantity a string", {**GOOD, "quantity": "2"}),
    ("quantity negative", {**GOOD, "quantity": -1}),
    ("sku null", {**GOOD, "sku": None}),
    ("no quantity", {key: value for key, value in GOOD.items() if key != "quantity"}),
    ("not an object", [GOOD]),
]


def test_the_battery_has_at_least_five_malformed_lines():
    assert len(MALFORMED_LINES) >= 5


def test_a_well_formed_line_is_parsed_as_sent():
    assert orders_module.parse(json.dumps(GOOD)).as_dict() == GOOD


@pytest.mark.parametrize("name, body", MALFORMED_LINES, ids=[name for name, _ in MALFORMED_LINES])
def test_a_malformed_line_is_refused_not_converted(name, body):
    with pytest.raises(errors.InvalidOrderLineError):
        orders_module.parse(json.dumps(body))


@pytest.mark.stack
@pytest.mark.timeout(300)
def test_malformed_lines_reserve_nothing_leave_stock_alone_and_reach_the_dlq(stack):
    orders = Orders(stack)
    scenario = Scenario("malformed")
    sku = scenario.sku("mug")
    orders.book_in(sku, units=100)
    bodies = [
        {**body, "sku": sku} if isinstance(body, dict) and "sku" in body and body["sku"] is not None else body
        for _, body in MALFORMED_LINES
    ]
    mine = [body for body in bodies if isinstance(body, dict) and body.get("sku") == sku]
    mark = orders.depths()
    for body in mine:
        orders.sqs.send_message(QueueUrl=orders.url("orders"), MessageBody=json.dumps(body))
    wait = 12 * orders.visibility_timeout("orders") + 120
    orders.wait_until(
        lambda: orders.arrived("orders_dlq", mark) >= len(mine) and orders.depth("orders") == 0,
        wait,
        "the malformed lines on the DLQ",
    )
    dead = [body for body in orders.peek("orders_dlq") if isinstance(body, dict) and body.get("sku") == sku]
    assert sorted(map(json.dumps, dead)) == sorted(map(json.dumps, mine))
    reservations = lessons.scan(stack["tables"]["reservations"], FilterExpression=Attr("sku").eq(sku))
    assert reservations == []
    stock = orders.table("stock").get_item(Key={"sku": sku}, ConsistentRead=True)["Item"]
    assert stock["available"] == 100
    # Taken off the DLQ, so later lessons and runs do not count them.
    for message in orders._receive_all("orders_dlq"):
        body = json.loads(message["Body"])
        if isinstance(body, dict) and body.get("sku") == sku:
            orders.sqs.delete_message(QueueUrl=orders.url("orders_dlq"), ReceiptHandle=message["ReceiptHandle"])
        else:
            orders.release("orders_dlq", [message["ReceiptHandle"]])
