"""The reading of a function's code behind the IAM test (``support.boto3_calls``), on small
function folders written for each case: it follows the ways the lab's code reaches AWS,
counts nothing the handler cannot reach, and says so when it cannot follow a call."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from support import boto3_calls


def _read(tmp_path: Path, files: dict[str, str], handler: str = "app.handler") -> boto3_calls.Reading:
    """The reading of ``handler`` in a folder ``lesson/`` holding ``files``, beside the lab's ``shared``."""
    shutil.copytree(boto3_calls.FUNCTIONS_DIR / "shared", tmp_path / "shared")
    for name, text in files.items():
        path = tmp_path / "lesson" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return boto3_calls.read_function("lesson", handler, functions_dir=tmp_path)


def _pairs(reading: boto3_calls.Reading) -> set[tuple]:
    return {(need.action, need.resource) for need in reading.needs}


def test_a_table_handed_to_a_helper_in_another_module_is_followed_into_it(tmp_path):
    reading = _read(
        tmp_path,
        {
            "app.py": """
                from shared import clients
                from store import remove

                def handler(event, context):
                    remove(clients.dynamodb_table("orders"), event["id"])
            """,
            "store.py": """
                def remove(table, key):
                    table.delete_item(Key={"id": key})
            """,
        },
    )
    assert _pairs(reading) == {("dynamodb:DeleteItem", ("table", "orders"))}


def test_a_transaction_needs_the_single_item_action_of_each_of_its_actions(tmp_path):
    reading = _read(
        tmp_path,
        {
            "app.py": """
                import boto3
                from shared.settings import table

                dynamodb = boto3.client("dynamodb")

                def check(name):
                    return {"TableName": name, "Key": {}}

                def handler(event, context):
                    items = [{"Put": {"TableName": table("orders"), "Item": {}}}]
                    items.append({"ConditionCheck": check(table("stock"))})
                    dynamodb.transact_write_items(TransactItems=items)
            """
        },
    )
    assert _pairs(reading) == {
        ("dynamodb:PutItem", ("table", "orders")),
        ("dynamodb:ConditionCheckItem", ("table", "stock")),
    }


def test_a_function_chosen_from_a_dict_of_functions_is_followed(tmp_path):
    reading = _read(
        tmp_path,
        {
            "app.py": """
                from shared import clients

                def first(user):
                    clients.dynamodb_table("users").get_item(Key={"id": user})

                def second(user):
                    with clients.dynamodb_table("records").batch_writer() as batch:
                        batch.delete_item(Key={"id": user})

                STEPS = {step.__name__: step for step in (first, second)}

                def handler(event, context):
                    for name in ("first", "second"):
                        STEPS[name](event["user"])
            """
        },
    )
    assert _pairs(reading) == {
        ("dynamodb:GetItem", ("table", "users")),
        ("dynamodb:BatchWriteItem", ("table", "records")),
    }


def test_a_paginated_listing_needs_its_operations_action_on_the_named_bucket(tmp_path):
    reading = _read(
        tmp_path,
        {
            "app.py": """
                from shared import clients, settings

                def handler(event, context):
                    pages = clients.client("s3").get_paginator("list_objects_v2")
                    for page in pages.paginate(Bucket=settings.required("USER_FILES_BUCKET")):
                        print(page)
            """
        },
    )
    assert _pairs(reading) == {("s3:ListBucket", ("env", "USER_FILES_BUCKET"))}


def test_the_persistence_layer_of_powertools_needs_what_its_source_calls(tmp_path):
    reading = _read(
        tmp_path,
        {
            "app.py": """
                from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
                from shared import settings

                persistence = DynamoDBPersistenceLayer(table_name=settings.table("idempotency"))

                def handler(event, context):
                    return event
            """
        },
    )
    assert _pairs(reading) == {
        (f"dynamodb:{operation}", ("table", "idempotency"))
        for operation in ("GetItem", "PutItem", "UpdateItem", "DeleteItem")
    }


def test_code_the_handler_cannot_reach_needs_nothing(tmp_path):
    reading = _read(
        tmp_path,
        {
            "app.py": """
                from shared import clients

                def never_called():
                    clients.dynamodb_table("orders").put_item(Item={})

                def handler(event, context):
                    return {}
            """
        },
    )
    assert _pairs(reading) == set()


def test_an_operation_on_a_client_the_reading_cannot_follow_is_reported(tmp_path):
    reading = _read(
        tmp_path,
        {
            "app.py": """
                import boto3

                def handler(event, context):
                    s3 = getattr(boto3, "client")("s3")
                    s3.delete_object(Bucket="b", Key=event["key"])
            """
        },
    )
    assert reading.unresolved == ["lesson/app.py:6 delete_object"]
