"""The capstone's refund handler: your starting point. Copy this file to my_refund.py,
edit the copy, and run the checker cell of 08_capstone.ipynb (section 3).

SQS feeds this function. Each message's body is one refund request:

    {"refund_id": "rf-...", "payment_id": "pay-...", "amount": 1500, "currency": "EUR",
     "email": "customer@example.com"}

For each request the function refunds the payment and emails the customer, through
`providers` (the payment and mail providers' client libraries; the notebook prints
their signatures). Its environment names the tables it may use:
`IDEMPOTENCY_TABLE` (partition key `id`, a string; TTL on the attribute `expiration`),
and the providers' own tables, which are theirs, not yours.

As written it does both effects every time a message arrives.
"""

import json

import providers


def handler(event, context):
    for record in event["Records"]:
        request = json.loads(record["body"])
        providers.refund(request["payment_id"], request["amount"], request["currency"])
        providers.send_email(
            request["email"],
            "Your refund",
            f"We refunded {request['amount'] / 100:.2f} {request['currency']} to your card.",
        )
