"""The fast path changes the cost of a request, never its answer.

The hot DynamoDB actions skip moto's routing when a request carries no `Origin`; with a
loopback `Origin` the same request takes moto's full route. So one server answers the
same calls both ways, and every answer (items, errors, cancellation reasons) must match.
Connections stay open between requests, and the loopback guard still judges each one.
"""

from __future__ import annotations

import http.client
import json
import uuid
from urllib.parse import urlsplit

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from idemlab.embedded.fast_path import FAST_PATH_VARIABLE
from idemlab.embedded.server import EmbeddedBackend

LIST_TABLES = {
    "X-Amz-Target": "DynamoDB_20120810.ListTables",
    "Content-Type": "application/x-amz-json-1.0",
    "Authorization": "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request",
}


def _dynamodb(url: str, origin: str | None = None, service: str = "dynamodb"):
    client = boto3.client(
        service,
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(retries={"max_attempts": 1}),
    )
    if origin:  # a loopback page's request: moto's full route (and its CORS handling)
        client.meta.events.register(
            f"before-sign.{service}", lambda request, **_: request.headers.__setitem__("Origin", origin)
        )
    return client


def _answer(call):
    try:
        response = call()
    except ClientError as error:
        return {
            "error": error.response["Error"],
            "status": error.response["ResponseMetadata"]["HTTPStatusCode"],
            **{k: v for k, v in error.response.items() if k not in ("Error", "ResponseMetadata")},
        }
    response.pop("ResponseMetadata")
    return response


def _script(client, table: str) -> list:
    """Every hot action, answered and refused: what the lessons' handlers send."""
    key = {"pk": {"S": "order-1"}}
    claim = {"ConditionExpression": "attribute_not_exists(pk)", "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
    return [
        _answer(
            lambda: client.put_item(TableName=table, Item={**key, "status": {"S": "NEW"}, "n": {"N": "1"}}, **claim)
        ),
        _answer(lambda: client.put_item(TableName=table, Item={**key, "status": {"S": "DUP"}}, **claim)),
        _answer(lambda: client.get_item(TableName=table, Key=key, ConsistentRead=True)),
        _answer(
            lambda: client.update_item(
                TableName=table,
                Key=key,
                UpdateExpression="SET #s = :to ADD n :one",
                ConditionExpression="#s = :from",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={":to": {"S": "DONE"}, ":from": {"S": "NEW"}, ":one": {"N": "1"}},
                ReturnValues="ALL_NEW",
            )
        ),
        _answer(
            lambda: client.update_item(
                TableName=table,
                Key=key,
                UpdateExpression="SET #s = :to",
                ConditionExpression="#s = :from",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={":to": {"S": "DONE"}, ":from": {"S": "NEW"}},
            )
        ),
        _answer(
            lambda: client.query(
                TableName=table, KeyConditionExpression="pk = :k", ExpressionAttributeValues={":k": key["pk"]}
            )
        ),
        _answer(
            lambda: client.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": table,
                            "Item": {"pk": {"S": "order-2"}},
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                    {
                        "ConditionCheck": {
                            "TableName": table,
                            "Key": key,
                            "ConditionExpression": "#s = :new",
                            "ExpressionAttributeNames": {"#s": "status"},
                            "ExpressionAttributeValues": {":new": {"S": "NEW"}},
                        }
                    },
                ]
            )
        ),
        _answer(lambda: client.delete_item(TableName=table, Key=key, ReturnValues="ALL_OLD")),
        _answer(lambda: client.get_item(TableName="no-such-table", Key=key)),
        _answer(lambda: client.put_item(TableName=table, Item={"wrong": {"S": "key"}})),
    ]


def _fresh_table(client) -> str:
    name = f"fast-{uuid.uuid4().hex[:8]}"
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


def test_hot_actions_answer_the_same_on_the_short_path_and_moto_route(backend):
    fast, full = _dynamodb(backend), _dynamodb(backend, origin="http://localhost:8888")
    short_table, full_table = _fresh_table(fast), _fresh_table(full)
    # each run on its own table: compare with the table's name taken out
    short_answers = json.loads(json.dumps(_script(fast, short_table), default=str).replace(short_table, "TABLE"))
    full_answers = json.loads(json.dumps(_script(full, full_table), default=str).replace(full_table, "TABLE"))
    assert len(short_answers) == 10
    for short, routed in zip(short_answers, full_answers, strict=False):
        assert short == routed
    assert short_answers[1]["error"]["Code"] == "ConditionalCheckFailedException"
    assert short_answers[1]["Item"]["status"] == {"S": "NEW"}  # the stored record comes back with the refusal
    assert short_answers[6]["error"]["Code"] == "TransactionCanceledException"


def test_both_routes_count_each_request_under_the_table_it_named(backend):
    from idemlab.embedded.server import request_counts

    fast, full = _dynamodb(backend), _dynamodb(backend, origin="http://localhost:8888")
    first, second = _fresh_table(fast), _fresh_table(fast)
    before = request_counts(backend)
    for client in (fast, full):
        client.put_item(TableName=first, Item={"pk": {"S": "a"}})
        client.get_item(TableName=second, Key={"pk": {"S": "a"}})
    fast.transact_write_items(
        TransactItems=[{"Put": {"TableName": name, "Item": {"pk": {"S": "t"}}}} for name in (second, first)]
    )
    after = request_counts(backend)

    def added(table: str) -> dict:
        old = before["dynamodb_by_table"].get(table, {})
        counted = {action: n - old.get(action, 0) for action, n in after["dynamodb_by_table"].get(table, {}).items()}
        return {action: n for action, n in counted.items() if n}

    assert added(first) == {"PutItem": 2}
    assert added(second) == {"GetItem": 2}
    assert added("+".join(sorted((first, second)))) == {"TransactWriteItems": 1}  # counted once, under both names
    for action, n in after["dynamodb"].items():  # by table adds up to by action
        assert n == sum(actions.get(action, 0) for actions in after["dynamodb_by_table"].values())


HANDLER = """
def handler(event, context):
    if event.get("fail"):
        raise ValueError("refused: " + event["fail"])
    return {"echo": event, "remaining_ms_positive": context.get_remaining_time_in_millis() > 0}
"""


def _invoked(client, name: str, payload: bytes, **options) -> dict:
    try:
        response = client.invoke(FunctionName=name, Payload=payload, **options)
    except ClientError as error:
        return {"error": error.response["Error"], "status": error.response["ResponseMetadata"]["HTTPStatusCode"]}
    body = json.loads(response["Payload"].read() or b"null")
    request_id = response["ResponseMetadata"]["HTTPHeaders"].get("x-amzn-requestid")
    if isinstance(body, dict):
        body.pop("stackTrace", None)  # the frames name the same file either way; keep the test about the answer
        if "requestId" in body:  # an error's requestId is the invocation's own (a new one each time)
            body["requestId"] = body["requestId"] == request_id
    return {
        "status": response["StatusCode"],
        "function_error": response.get("FunctionError"),
        "version": response.get("ExecutedVersion"),
        "has_request_id": bool(response["ResponseMetadata"]["HTTPHeaders"].get("x-amzn-requestid")),
        "body": body,
    }


def test_invoke_answers_the_same_on_the_short_path_and_moto_route(backend, make_function):
    name = make_function(HANDLER)
    fast = _dynamodb(backend, service="lambda")
    full = _dynamodb(backend, origin="http://localhost:8888", service="lambda")
    arn = fast.get_function(FunctionName=name)["Configuration"]["FunctionArn"]
    calls = [
        (name, b'{"order": 1}', {}),
        (name, b'{"fail": "card declined"}', {}),
        (name, b"{}", {"InvocationType": "DryRun"}),
        (name, b"{}", {"InvocationType": "Event"}),
        (name, b"{}", {"Qualifier": "no-such-alias"}),
        (name, b"{}", {"Qualifier": "$LATEST"}),  # a query string, percent-encoded
        (arn, b'{"order": 2}', {}),  # a path with percent-encoded colons
        (name, b"not json", {}),
        (f"fn-missing-{uuid.uuid4().hex[:6]}", b"{}", {}),
    ]
    for function, payload, options in calls:
        assert _invoked(fast, function, payload, **options) == _invoked(full, function, payload, **options), (
            payload,
            options,
        )
    answered = _invoked(fast, name, b'{"order": 1}')
    assert answered["body"] == {"echo": {"order": 1}, "remaining_ms_positive": True} and answered["has_request_id"]
    failed = _invoked(fast, name, b'{"fail": "x"}')
    assert failed["function_error"] == "Unhandled" and failed["body"]["requestId"] is True


def _raw(connection: http.client.HTTPConnection, headers: dict) -> tuple[int, dict, bytes]:
    connection.putrequest("POST", "/", skip_host=True, skip_accept_encoding=True)
    for name, value in {**LIST_TABLES, **headers}.items():
        connection.putheader(name, value)
    connection.putheader("Content-Length", "2")
    connection.endheaders(b"{}")
    response = connection.getresponse()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()


def test_one_connection_serves_many_requests_and_each_is_still_guarded(backend):
    parts = urlsplit(backend)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        local = {"Host": f"127.0.0.1:{parts.port}"}
        status, headers, _ = _raw(connection, local)
        assert status == 200 and headers.get("connection") != "close"
        port_in_use = connection.sock.getsockname()
        for foreign in ({"Host": "rebind.example:80"}, {**local, "Origin": "https://evil.example"}):
            status, _, body = _raw(connection, foreign)
            assert status == 403, body
        status, _, body = _raw(connection, local)
        assert status == 200 and "TableNames" in json.loads(body)
        assert connection.sock.getsockname() == port_in_use  # the same TCP connection throughout
    finally:
        connection.close()


def test_a_chunked_request_body_is_answered_and_its_connection_closed(backend):
    parts = urlsplit(backend)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        connection.request(
            "POST",
            "/",
            body=iter([b"{", b"}"]),
            headers={**LIST_TABLES, "Host": f"127.0.0.1:{parts.port}"},
            encode_chunked=True,
        )
        response = connection.getresponse()
        assert response.status == 200 and "TableNames" in json.loads(response.read())
        assert response.getheader("Connection") == "close"
    finally:
        connection.close()


def _script_answers(url: str) -> list:
    client = _dynamodb(url)
    table = _fresh_table(client)
    return json.loads(json.dumps(_script(client, table), default=str).replace(table, "TABLE"))


@pytest.mark.timeout(120)
def test_with_the_fast_path_off_the_backend_serves_as_before(backend):
    with EmbeddedBackend(environment={FAST_PATH_VARIABLE: "0"}) as slow:
        parts = urlsplit(slow.url)
        answers = _script_answers(slow.url)
        assert answers[1]["error"]["Code"] == "ConditionalCheckFailedException"
        # the fast path's server (its short path, its leaner errors) answers alike
        assert _script_answers(backend) == answers
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        try:
            status, headers, _ = _raw(connection, {"Host": f"127.0.0.1:{parts.port}"})
            assert (
                status == 200 and headers.get("connection") == "close"
            )  # werkzeug's server, one request per connection
        finally:
            connection.close()
        with open(slow.log_path) as log:
            assert f"fast path off ({FAST_PATH_VARIABLE}=0)" in log.read()


def _exchange(url: str, request: bytes) -> bytes:
    """Send raw bytes, read until the server closes the connection."""
    import socket

    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


def test_requests_the_one_pass_parser_leaves_to_the_standard_one_are_answered_alike(backend):
    """HTTP/1.0, an Expect header and an underscored header name take the standard
    library's parser; a plain HTTP/1.1 request the one-pass one. All four list tables."""
    host = urlsplit(backend).netloc
    head = (
        "".join(f"{name}: {value}\r\n" for name, value in LIST_TABLES.items())
        + f"Host: {host}\r\nContent-Length: 2\r\n"
    )
    variants = {
        "plain": f"POST / HTTP/1.1\r\n{head}Connection: close\r\n\r\n{{}}",
        "HTTP/1.0": f"POST / HTTP/1.0\r\n{head}\r\n{{}}",
        "Expect": f"POST / HTTP/1.1\r\n{head}Expect: 100-continue\r\nConnection: close\r\n\r\n{{}}",
        "underscore": f"POST / HTTP/1.1\r\n{head}X_Odd_Name: 1\r\nConnection: close\r\n\r\n{{}}",
    }
    for name, request in variants.items():
        answer = _exchange(backend, request.encode())
        if name == "Expect":
            assert answer.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), answer
            answer = answer.split(b"\r\n\r\n", 1)[1]
        status_line, _, rest = answer.partition(b"\r\n")
        assert status_line.split(b" ")[1] == b"200", (name, answer)
        assert "TableNames" in json.loads(rest.split(b"\r\n\r\n", 1)[1]), name


def test_the_short_path_sends_the_headers_moto_route_sends(backend):
    client = _dynamodb(backend)
    table = _fresh_table(client)
    names = []
    for origin in (None, "http://localhost:8888"):
        response = _dynamodb(backend, origin=origin).get_item(TableName=table, Key={"pk": {"S": "absent"}})
        headers = response["ResponseMetadata"]["HTTPHeaders"]
        names.append(sorted(name for name in headers if name not in ("access-control-allow-origin", "vary")))
    assert names[0] == names[1]
    assert {"x-amzn-requestid", "x-amz-crc32", "content-type", "content-length"} <= set(names[0])


def test_a_kept_condition_parse_judges_each_request_by_its_own_names_and_values(backend):
    """The same condition text, asked again with other names, values or value types
    (each ask after the first reuses the kept parse), gets the answer its own inputs give;
    an expression moto refuses is refused each time."""
    client = _dynamodb(backend)
    table = _fresh_table(client)
    item = {"pk": {"S": "k"}, "big": {"N": "5"}, "small": {"N": "1"}}
    client.put_item(TableName=table, Item=item)

    def put(expression: str, names: dict, values: dict) -> str:
        answer = _answer(
            lambda: client.put_item(
                TableName=table,
                Item=item,
                ConditionExpression=expression,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        )
        return answer["error"]["Code"] if "error" in answer else "ok"

    asks = [
        ({"#a": "big"}, {":v": {"N": "5"}}, "ok"),
        ({"#a": "big"}, {":v": {"N": "3"}}, "ConditionalCheckFailedException"),  # another value
        ({"#a": "small"}, {":v": {"N": "1"}}, "ok"),  # another name
        ({"#a": "big"}, {":v": {"S": "5"}}, "ConditionalCheckFailedException"),  # another type: a string is no number
        ({"#a": "big", "#b": "small"}, {":v": {"N": "5"}}, "ValidationException"),  # #b unused
    ]
    for _ in range(3):
        assert [put("#a = :v", names, values) for names, values, _ in asks] == [expected for *_, expected in asks]
        assert put("status = :v", {}, {":v": {"N": "5"}}) == "ValidationException"  # a reserved word


def test_request_ids_keep_their_form_and_differ_on_both_routes(backend):
    """moto's random strings are drawn in one call on the fast path: request ids stay 52
    letters and digits (moto's form), and no two answers share one."""
    client = _dynamodb(backend)
    table = _fresh_table(client)
    ids = []
    for origin in (None, "http://localhost:8888") * 20:
        response = _dynamodb(backend, origin=origin).get_item(TableName=table, Key={"pk": {"S": "absent"}})
        ids.append(response["ResponseMetadata"]["HTTPHeaders"]["x-amzn-requestid"])
    assert all(len(found) == 52 and found.isalnum() and found.isascii() for found in ids)
    assert len(set(ids)) == len(ids)


def test_moto_random_strings_keep_their_pool_length_and_case():
    from moto.moto_api._internal import mock_random

    from idemlab.embedded import fast_path

    fast_path.quick_random_strings()
    assert mock_random.get_random_string.__func__.__module__ == fast_path.__name__
    samples = [mock_random.get_random_string(length=40) for _ in range(50)]
    assert all(len(sample) == 40 and sample.isalnum() and sample.isascii() for sample in samples)
    assert any(character.isdigit() for character in "".join(samples))
    letters = "".join(mock_random.get_random_string(length=40, include_digits=False) for _ in range(50))
    assert letters.isalpha() and letters.isascii()
    lower = "".join(mock_random.get_random_string(length=40, lower_case=True) for _ in range(50))
    assert lower == lower.lower() and any(character.isalpha() for character in lower)
    try:
        mock_random.seed(7)
        first = mock_random.get_random_string()
        mock_random.seed(7)
        assert mock_random.get_random_string() == first  # moto's seed still makes ids repeatable
    finally:
        mock_random.seed()  # fresh randomness again for whatever else runs in this process
