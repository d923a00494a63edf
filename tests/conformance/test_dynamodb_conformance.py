"""DynamoDB: a refused conditional write tells the caller what is stored, and writes nothing."""

import uuid

import pytest
from botocore.exceptions import ClientError


def test_refused_conditional_put_returns_the_stored_item(sandbox, table):
    """A conditional PutItem that fails with ReturnValuesOnConditionCheckFailure=ALL_OLD
    raises ConditionalCheckFailedException carrying the stored item, and leaves it as it was.

    https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_PutItem.html
    (ReturnValuesOnConditionCheckFailure; ConditionalCheckFailedException's Item)
    """
    dynamodb = sandbox.client("dynamodb")
    key = f"claim-{uuid.uuid4().hex}"
    stored = {"pk": {"S": key}, "owner": {"S": "first"}, "token": {"N": "1"}}
    dynamodb.put_item(TableName=table, Item=stored)

    with pytest.raises(ClientError) as refused:
        dynamodb.put_item(
            TableName=table,
            Item={"pk": {"S": key}, "owner": {"S": "second"}, "token": {"N": "2"}},
            ConditionExpression="attribute_not_exists(pk)",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )

    assert refused.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    assert refused.value.response.get("Item") == stored
    assert dynamodb.get_item(TableName=table, Key={"pk": {"S": key}}, ConsistentRead=True)["Item"] == stored


def test_cancelled_transaction_names_the_failed_condition_and_writes_nothing(sandbox, table):
    """TransactWriteItems whose second condition fails raises TransactionCanceledException
    with one CancellationReason per action, in request order: "None" for the action that
    would have succeeded, "ConditionalCheckFailed" for the one that failed. No action applies.

    https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html
    (Errors: TransactionCanceledException, CancellationReasons)
    """
    dynamodb = sandbox.client("dynamodb")
    fresh, taken = f"fresh-{uuid.uuid4().hex}", f"taken-{uuid.uuid4().hex}"
    dynamodb.put_item(TableName=table, Item={"pk": {"S": taken}, "owner": {"S": "first"}})

    def put_if_absent(key: str) -> dict:
        return {
            "Put": {
                "TableName": table,
                "Item": {"pk": {"S": key}, "owner": {"S": "second"}},
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    with pytest.raises(ClientError) as cancelled:
        dynamodb.transact_write_items(TransactItems=[put_if_absent(fresh), put_if_absent(taken)])

    assert cancelled.value.response["Error"]["Code"] == "TransactionCanceledException"
    codes = [reason.get("Code") for reason in cancelled.value.response.get("CancellationReasons", [])]
    assert codes == ["None", "ConditionalCheckFailed"]
    # All or nothing: the action whose condition held was not applied either.
    assert "Item" not in dynamodb.get_item(TableName=table, Key={"pk": {"S": fresh}}, ConsistentRead=True)
    assert dynamodb.get_item(TableName=table, Key={"pk": {"S": taken}}, ConsistentRead=True)["Item"]["owner"] == {"S": "first"}
