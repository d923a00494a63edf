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
    assert dynamodb.get_item(TableName=table, Key={"pk": {"S": taken}}, ConsistentRead=True)["Item"]["owner"] == {
        "S": "first"
    }


def test_cancelled_transaction_leaves_what_it_would_have_updated_or_deleted_as_it_was(sandbox):
    """No action of a cancelled TransactWriteItems applies, whatever its kind: an item it
    would have updated keeps its attributes, one it would have deleted stays, one it would
    have created never appears, on a table with a sort key too.

    https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html
    ("The actions are completed atomically so that either all of them succeed, or all of them fail.")
    """
    dynamodb = sandbox.client("dynamodb")
    table = sandbox.name("sorted")
    dynamodb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    sandbox.on_teardown(dynamodb.delete_table, TableName=table)
    dynamodb.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
    user = f"user-{uuid.uuid4().hex}"
    counter = {"pk": {"S": user}, "sk": {"S": "counter"}, "count": {"N": "1"}, "tags": {"SS": ["a"]}}
    doomed = {"pk": {"S": user}, "sk": {"S": "doomed"}}
    guard = {"pk": {"S": user}, "sk": {"S": "guard"}, "status": {"S": "CLOSED"}}
    for item in (counter, doomed, guard):
        dynamodb.put_item(TableName=table, Item=item)
    brand_new = f"new-{uuid.uuid4().hex}"

    def key(item: dict) -> dict:
        return {"pk": item["pk"], "sk": item["sk"]}

    with pytest.raises(ClientError) as cancelled:
        dynamodb.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": table,
                        "Key": key(counter),
                        "UpdateExpression": "SET #c = #c + :one ADD tags :b",
                        "ExpressionAttributeNames": {"#c": "count"},
                        "ExpressionAttributeValues": {":one": {"N": "1"}, ":b": {"SS": ["b"]}},
                    }
                },
                {"Delete": {"TableName": table, "Key": key(doomed)}},
                {"Put": {"TableName": table, "Item": {"pk": {"S": brand_new}, "sk": {"S": "first"}}}},
                {
                    "ConditionCheck": {
                        "TableName": table,
                        "Key": key(guard),
                        "ConditionExpression": "#s = :open",
                        "ExpressionAttributeNames": {"#s": "status"},
                        "ExpressionAttributeValues": {":open": {"S": "OPEN"}},
                    }
                },
            ]
        )

    assert cancelled.value.response["Error"]["Code"] == "TransactionCanceledException"
    stored = dynamodb.query(
        TableName=table,
        KeyConditionExpression="pk = :u",
        ExpressionAttributeValues={":u": {"S": user}},
        ConsistentRead=True,
    )
    assert sorted(stored["Items"], key=lambda item: item["sk"]["S"]) == [counter, doomed, guard]
    assert (
        dynamodb.query(
            TableName=table,
            KeyConditionExpression="pk = :u",
            ExpressionAttributeValues={":u": {"S": brand_new}},
            ConsistentRead=True,
        )["Items"]
        == []
    )


def test_cancelled_transaction_leaves_no_stream_record(sandbox):
    """A table's stream records the item changes that happened; a cancelled
    TransactWriteItems changed nothing, so it adds no record.

    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Streams.html
    (a stream record for each item modification)
    """
    dynamodb, streams = sandbox.client("dynamodb"), sandbox.client("dynamodbstreams")
    table = sandbox.name("streamed")
    created = dynamodb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    sandbox.on_teardown(dynamodb.delete_table, TableName=table)
    dynamodb.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
    taken = {"pk": {"S": f"taken-{uuid.uuid4().hex}"}}
    dynamodb.put_item(TableName=table, Item=taken)
    with pytest.raises(ClientError):
        dynamodb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table, "Item": {"pk": {"S": f"fresh-{uuid.uuid4().hex}"}}}},
                {"Put": {"TableName": table, "Item": taken, "ConditionExpression": "attribute_not_exists(pk)"}},
            ]
        )

    stream = created["TableDescription"]["LatestStreamArn"]
    records = []
    for shard in streams.describe_stream(StreamArn=stream)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=stream, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        records += streams.get_records(ShardIterator=iterator)["Records"]
    assert [(record["eventName"], record["dynamodb"]["Keys"]) for record in records] == [("INSERT", taken)]


@pytest.mark.parametrize(
    "condition, names, values, named",
    [
        ("#n < :limit", {"#n": "count"}, None, ":limit"),  # a value it never defines
        ("#n < :limit", None, {":limit": {"N": "1"}}, "#n"),  # a name it never defines
        ("#n < < :limit", {"#n": "count"}, {":limit": {"N": "1"}}, "<"),  # a syntax error
    ],
    ids=["undefined value", "undefined name", "syntax error"],
)
def test_a_condition_that_cannot_be_read_is_a_validation_error_and_writes_nothing(
    sandbox, table, condition, names, values, named
):
    """A ConditionExpression with a syntax error, or one using a name or value the request
    does not define, is refused with a ValidationException (a client error: HTTP 400) that
    says what is wrong, and nothing is written.

    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ExpressionAttributeValues.html
    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ExpressionAttributeNames.html
    https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/CommonErrors.html (ValidationException, 400)
    """
    dynamodb = sandbox.client("dynamodb")
    key = f"unread-{uuid.uuid4().hex}"
    request = {"TableName": table, "Item": {"pk": {"S": key}, "count": {"N": "5"}}, "ConditionExpression": condition}
    if names:
        request["ExpressionAttributeNames"] = names
    if values:
        request["ExpressionAttributeValues"] = values
    with pytest.raises(ClientError) as refused:
        dynamodb.put_item(**request)
    error = refused.value.response
    assert (error["ResponseMetadata"]["HTTPStatusCode"], error["Error"]["Code"]) == (400, "ValidationException"), error
    assert named in error["Error"]["Message"] and "ConditionExpression" in error["Error"]["Message"], error["Error"][
        "Message"
    ]
    assert "Item" not in dynamodb.get_item(TableName=table, Key={"pk": {"S": key}}, ConsistentRead=True)
