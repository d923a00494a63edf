"""SQS -> Lambda event source mappings on the embedded backend, over HTTP.

Each test creates its own queues and a function that records every record it is
handed (message, receive count, batch) in a table, then reads what Lambda delivered.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid

import pytest
from botocore.exceptions import ClientError

from idemlab import clients
from idemlab.embedded.sqs_event_source import failed_item_ids
from idemlab.lessons import queue_depth as depth

# Records every record it is handed. A body with "poison": true fails: the function
# raises (MODE=raise) or lists it in batchItemFailures (MODE=report).
# Its client is made at import, in the init phase (a deadline of its own in the embedded
# runtime): the function's timeout (the queue's compressed visibility timeout, which it may
# not exceed) is then only the batch's few writes, not a client's creation.
CONSUMER = """
import json, os, time, uuid, boto3
db = boto3.client("dynamodb")
def handler(event, context):
    batch = uuid.uuid4().hex
    failures = []
    for position, record in enumerate(event["Records"]):
        body = json.loads(record["body"])
        count = record["attributes"]["ApproximateReceiveCount"]
        db.put_item(TableName=os.environ["TABLE"], Item={
            "pk": {"S": body["id"] + "#" + count},
            "id": {"S": body["id"]}, "batch": {"S": batch}, "position": {"N": str(position)},
            "size": {"N": str(len(event["Records"]))}, "at": {"N": repr(time.time())},
            "record": {"S": json.dumps(record)},
        })
        if body.get("poison"):
            failures.append({"itemIdentifier": record["messageId"]})
    if failures and os.environ["MODE"] == "raise":
        raise RuntimeError("poison message")
    return {"batchItemFailures": failures}
"""

# Seconds: compressed time, so a failed batch comes back quickly; also the function's timeout.
# 2 s was passed by a batch's few writes on a loaded runner (load 40): the whole batch came
# back, and messages that had succeeded were counted twice.
VISIBILITY = 8


def make_queue(name: str, max_receive: int | None = None, fifo: bool = False) -> tuple[str, str, str | None]:
    """(url, arn, dead-letter url) of a new queue, with a dead-letter queue when max_receive is set."""
    sqs = clients.client("sqs")
    suffix = ".fifo" if fifo else ""
    attributes = {"VisibilityTimeout": str(VISIBILITY)}
    if fifo:
        attributes.update(FifoQueue="true", ContentBasedDeduplication="true")
    dlq_url = None
    if max_receive:
        dlq_url = sqs.create_queue(QueueName=f"{name}-dlq{suffix}", Attributes={"FifoQueue": "true"} if fifo else {})[
            "QueueUrl"
        ]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        attributes["RedrivePolicy"] = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receive})
    url = sqs.create_queue(QueueName=name + suffix, Attributes=attributes)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn, dlq_url


@pytest.fixture
def consumer(make_function, table):
    def create(mode: str) -> str:
        return make_function(CONSUMER, timeout=VISIBILITY, environment={"TABLE": table, "MODE": mode})

    return create


@pytest.fixture
def mappings():
    created = []
    yield created
    for uuid_ in created:  # stop the pollers, so later tests are not slowed by them
        clients.client("lambda").delete_event_source_mapping(UUID=uuid_)


def mapping(created: list, function: str, queue_arn: str, **settings) -> str:
    uuid_ = clients.client("lambda").create_event_source_mapping(
        FunctionName=function, EventSourceArn=queue_arn, **settings
    )["UUID"]
    created.append(uuid_)
    return uuid_


def deliveries(table: str) -> list[dict]:
    items = clients.client("dynamodb").scan(TableName=table)["Items"]
    rows = [
        {
            "id": i["id"]["S"],
            "count": int(i["pk"]["S"].rsplit("#", 1)[1]),
            "batch": i["batch"]["S"],
            "position": int(i["position"]["N"]),
            "size": int(i["size"]["N"]),
            "at": float(i["at"]["N"]),
            "record": json.loads(i["record"]["S"]),
        }
        for i in items
    ]
    return sorted(rows, key=lambda row: (row["at"], row["position"]))


# A deadline, not a wait: each call returns as soon as its condition holds. 30 s was missed
# once by a worker's first test on a loaded runner (CI, 2026-12-05: five messages undelivered).
WAIT_SECONDS = 120


def wait_for(condition, timeout: float = WAIT_SECONDS, seen=None):
    """condition()'s first true value; past the deadline an AssertionError, with what `seen()`
    says was there at the end."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"condition not met within {timeout} s" + (f"; at the end: {seen()}" if seen else ""))


def delivered(table: str, url: str):
    """What a wait for deliveries reports when it gives up: each delivery as (message, receive
    count), and the messages still on the queue. A receive count above 1 means a batch came
    back (an invocation failed or timed out), and a condition on the number of rows may then
    never hold."""
    return lambda: f"deliveries {[(row['id'], row['count']) for row in deliveries(table)]}, queue depth {depth(url)}"


def send(url: str, *bodies: dict, **extra) -> None:
    entries = [{"Id": str(i), "MessageBody": json.dumps(body), **extra} for i, body in enumerate(bodies)]
    for start in range(0, len(entries), 10):
        clients.client("sqs").send_message_batch(QueueUrl=url, Entries=entries[start : start + 10])


def test_messages_arrive_in_one_batch_with_the_record_shape_lambda_uses(backend, consumer, table, mappings):
    url, arn, _ = make_queue(f"q-{uuid.uuid4().hex[:8]}")
    send(url, *({"id": f"m{i}"} for i in range(5)))
    mapping(mappings, consumer("raise"), arn, BatchSize=5, MaximumBatchingWindowInSeconds=1)

    rows = wait_for(lambda: len(deliveries(table)) == 5 and deliveries(table), seen=delivered(table, url))
    assert {row["batch"] for row in rows} == {rows[0]["batch"]}, "five messages, batch size 5: one invocation"
    assert {row["size"] for row in rows} == {5}
    record = rows[0]["record"]
    assert record["eventSource"] == "aws:sqs" and record["eventSourceARN"] == arn and record["awsRegion"] == "us-east-1"
    assert record["md5OfBody"] == hashlib.md5(record["body"].encode()).hexdigest()
    assert record["attributes"]["ApproximateReceiveCount"] == "1"
    assert {"SentTimestamp", "SenderId", "ApproximateFirstReceiveTimestamp"} <= set(record["attributes"])
    wait_for(lambda: depth(url) == 0)


def test_message_attributes_arrive_as_lambda_shows_them_binary_ones_base64_encoded(backend, consumer, table, mappings):
    url, arn, _ = make_queue(f"q-{uuid.uuid4().hex[:8]}")
    attributes = {
        "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
        "note": {"DataType": "String", "StringValue": "x"},
    }
    clients.client("sqs").send_message(
        QueueUrl=url, MessageBody=json.dumps({"id": "attrs"}), MessageAttributes=attributes
    )
    mapping(mappings, consumer("raise"), arn)

    [row] = wait_for(lambda: deliveries(table))
    assert row["record"]["messageAttributes"] == {  # with-sqs.html, example event
        "blob": {"binaryValue": "AAE=", "stringListValues": [], "binaryListValues": [], "dataType": "Binary"},
        "note": {"stringValue": "x", "stringListValues": [], "binaryListValues": [], "dataType": "String"},
    }


def test_failed_batch_comes_back_after_the_visibility_timeout_then_goes_to_the_dlq(backend, consumer, table, mappings):
    url, arn, dlq_url = make_queue(f"q-{uuid.uuid4().hex[:8]}", max_receive=2)
    send(url, {"id": "good"}, {"id": "bad", "poison": True})
    mapping(mappings, consumer("raise"), arn, BatchSize=10)

    wait_for(lambda: depth(dlq_url) == 2)
    rows = deliveries(table)
    received = sorted((row["id"], row["count"]) for row in rows)
    assert received == [("bad", 1), ("bad", 2), ("good", 1), ("good", 2)], "the whole batch failed, twice"
    # From the first receive (SQS stamps it on the message) to the second delivery's run:
    # a handler's own clock would also count a slow first start (seen on a loaded machine).
    for row in rows:
        if row["count"] == 2:
            first_received = int(row["record"]["attributes"]["ApproximateFirstReceiveTimestamp"]) / 1000
            assert row["at"] - first_received >= VISIBILITY - 0.1, (
                "hidden for the visibility timeout, not made visible at once"
            )
    assert depth(url) == 0


def test_partial_batch_response_brings_back_only_the_failed_message(backend, consumer, table, mappings):
    url, arn, dlq_url = make_queue(f"q-{uuid.uuid4().hex[:8]}", max_receive=3)
    send(url, {"id": "a"}, {"id": "bad", "poison": True}, {"id": "b"})
    mapping(mappings, consumer("report"), arn, BatchSize=10, FunctionResponseTypes=["ReportBatchItemFailures"])

    wait_for(lambda: depth(dlq_url) == 1)
    counts = {}
    for row in deliveries(table):
        counts[row["id"]] = max(counts.get(row["id"], 0), row["count"])
    assert counts == {"a": 1, "b": 1, "bad": 3}
    left = clients.client("sqs").receive_message(QueueUrl=dlq_url)["Messages"]
    assert json.loads(left[0]["Body"])["id"] == "bad"
    assert depth(url) == 0


def test_partial_batch_response_is_ignored_without_report_batch_item_failures(backend, consumer, table, mappings):
    url, arn, _ = make_queue(f"q-{uuid.uuid4().hex[:8]}")
    send(url, {"id": "a"}, {"id": "bad", "poison": True})
    mapping(mappings, consumer("report"), arn, BatchSize=10)

    def seen():  # what was there, should the deliveries not come (a loaded run once passed 120 s here)
        return {"deliveries": deliveries(table), "depth": depth(url)}

    wait_for(lambda: len(deliveries(table)) == 2, seen=seen)
    wait_for(lambda: depth(url) == 0, seen=seen)  # the function returned normally: Lambda deleted both


@pytest.mark.parametrize(
    "payload, expected",
    [
        (b"", set()),
        (b"null", set()),
        (b"{}", set()),
        (b'{"batchItemFailures": []}', set()),
        (b'{"batchItemFailures": null}', set()),
        (b'{"batchItemFailures": [{"itemIdentifier": "m1"}]}', {"m1"}),
        (b"not json", None),
        (b'{"batchItemFailures": [{"itemIdentifier": ""}]}', None),
        (b'{"batchItemFailures": [{"itemIdentifier": null}]}', None),
        (b'{"batchItemFailures": [{"itemId": "m1"}]}', None),
        (b'{"batchItemFailures": [{"itemIdentifier": "not-in-batch"}]}', None),
    ],
)
def test_partial_batch_response_success_and_failure_conditions(payload, expected):
    assert failed_item_ids(payload, {"m1", "m2"}) == expected


def test_fifo_keeps_group_order_and_a_failing_message_blocks_its_group(backend, consumer, table, mappings):
    url, arn, dlq_url = make_queue(f"q-{uuid.uuid4().hex[:8]}", max_receive=2, fifo=True)
    for group in ("g1", "g2"):
        for i in range(4):
            body = {"id": f"{group}-{i}", "poison": group == "g1" and i == 1}
            clients.client("sqs").send_message(QueueUrl=url, MessageBody=json.dumps(body), MessageGroupId=group)
    mapping(mappings, consumer("raise"), arn, BatchSize=1)

    wait_for(lambda: depth(url) == 0 and depth(dlq_url) == 1)
    rows = deliveries(table)
    for group in ("g1", "g2"):
        # Each message's first delivery that reached the handler: on a loaded runner an
        # invocation can fail before the handler runs, so that may be its second receive.
        first_seen = {}
        for row in sorted(rows, key=lambda row: row["at"]):
            if row["id"].startswith(group):
                first_seen.setdefault(row["id"], row["at"])
        order = sorted(first_seen, key=first_seen.get)
        assert order == sorted(order), f"{group} delivered in send order: {order}"
        assert len(order) == 4, order
    poison = [row["at"] for row in rows if row["id"] == "g1-1"]
    after = [row["at"] for row in rows if row["id"] in ("g1-2", "g1-3")]
    # Received twice (maxReceiveCount 2), then on the DLQ; a receive whose invocation failed
    # before the handler ran (a loaded runner) leaves no row, hence one row at least.
    assert 1 <= len(poison) <= 2 and min(after) > max(poison), "nothing later in g1 ran while g1-1 was failing"
    record = next(row["record"] for row in rows if row["id"] == "g2-0")
    assert record["attributes"]["MessageGroupId"] == "g2"
    assert {"MessageDeduplicationId", "SequenceNumber"} <= set(record["attributes"])


def test_fifo_deduplicates_a_repeated_send_even_after_the_first_copy_was_deleted(backend):
    url, _, _ = make_queue(f"q-{uuid.uuid4().hex[:8]}", fifo=True)
    sqs = clients.client("sqs")
    body = json.dumps({"id": "order-1"})
    sent = sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="g")["MessageId"]
    again = sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="g")[
        "MessageId"
    ]  # content-based: a duplicate
    assert again == sent, "a deduplicated send answers with the first copy's id"
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert len(first) == 1
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first[0]["ReceiptHandle"])

    sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="g")  # within 5 minutes
    sqs.send_message(QueueUrl=url, MessageBody="other", MessageGroupId="g", MessageDeduplicationId="explicit")
    sqs.send_message(QueueUrl=url, MessageBody="other again", MessageGroupId="g", MessageDeduplicationId="explicit")
    bodies = [m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])]
    assert bodies == ["other"], "SQS keeps deduplication ids for 5 minutes, deleted or not"


def test_mapping_is_refused_when_the_function_outlives_the_visibility_timeout(backend, make_function, table):
    _, arn, _ = make_queue(f"q-{uuid.uuid4().hex[:8]}")
    slow = make_function(CONSUMER, timeout=VISIBILITY + 1, environment={"TABLE": table, "MODE": "raise"})
    with pytest.raises(ClientError) as refused:
        clients.client("lambda").create_event_source_mapping(FunctionName=slow, EventSourceArn=arn)
    assert refused.value.response["Error"]["Code"] == "InvalidParameterValueException"
    assert clients.client("lambda").list_event_source_mappings(EventSourceArn=arn)["EventSourceMappings"] == []


def test_fifo_mapping_refuses_a_batching_window(backend, consumer):
    _, arn, _ = make_queue(f"q-{uuid.uuid4().hex[:8]}", fifo=True)
    with pytest.raises(ClientError) as refused:
        clients.client("lambda").create_event_source_mapping(
            FunctionName=consumer("raise"), EventSourceArn=arn, MaximumBatchingWindowInSeconds=2
        )
    assert refused.value.response["Error"]["Code"] == "InvalidParameterValueException"


def test_a_disabled_mapping_reports_disabled_only_once_its_poller_stopped_and_then_receives_nothing(
    backend, consumer, table, mappings
):
    url, arn, _ = make_queue(f"q-{uuid.uuid4().hex[:8]}")
    lam = clients.client("lambda")
    uuid_ = mapping(mappings, consumer("raise"), arn)
    send(url, {"id": "before"})
    wait_for(lambda: len(deliveries(table)) == 1)  # its poller is running, long-polling the queue
    lam.update_event_source_mapping(UUID=uuid_, Enabled=False)
    wait_for(lambda: lam.get_event_source_mapping(UUID=uuid_)["State"] == "Disabled", timeout=10)

    send(url, {"id": "while-disabled"})
    time.sleep(2)  # a running poller would have taken it by now
    assert [row["id"] for row in deliveries(table)] == ["before"] and depth(url) == 1
    lam.update_event_source_mapping(UUID=uuid_, Enabled=True)
    wait_for(lambda: len(deliveries(table)) == 2)


def test_a_fifo_group_comes_back_in_order_after_its_visibility_timeout(backend):
    url, _, _ = make_queue(f"q-{uuid.uuid4().hex[:8]}", fifo=True)
    sqs = clients.client("sqs")
    for body in ("first", "second", "third"):
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="g")
    assert [m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]] == [
        "first",
        "second",
        "third",
    ]
    # Not deleted: the group is locked until the visibility timeout ends, then comes back whole.
    again = wait_for(
        lambda: sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages"),
        timeout=VISIBILITY + WAIT_SECONDS,
    )
    assert [m["Body"] for m in again] == ["first", "second", "third"]


def test_a_fifo_pass_judges_visibility_at_one_instant(monkeypatch):
    """Under load, the first of two messages received together came back just before a
    waiting pass released it and the second just after: moto's loop then released the
    second, unlocked the group and handed it out first. Here moto's loop is made to start
    40 ms after the release (its deepcopy of the locked groups sleeps), while the second
    message comes back 20 ms after the release. (In-process moto with the lab's patches.)"""
    from moto.core.utils import unix_time_millis
    from moto.sqs import models

    from idemlab.embedded import sqs_event_source

    sqs_event_source.install()
    backend = models.sqs_backends["123456789012"]["us-east-1"]
    name = f"q-{uuid.uuid4().hex[:8]}.fifo"
    backend.create_queue(name, FifoQueue="true", ContentBasedDeduplication="true")
    for body in ("first", "second"):
        backend.send_message(name, body, group_id="g")
    taken = backend.receive_message(name, 10, 0, 30)
    assert [m.body for m in taken] == ["first", "second"]
    first, second = backend.get_queue(name)._messages
    now = unix_time_millis()
    first.visible_at, second.visible_at = now - 1000, now + 20
    copy = models.deepcopy
    monkeypatch.setattr(models, "deepcopy", lambda value: (time.sleep(0.04), copy(value))[1])
    again = backend.receive_message(name, 1, 1, 30)
    assert [m.body for m in again] == ["first"]


def test_the_batching_window_gathers_messages_sent_one_after_another(backend, consumer, table, mappings):
    url, arn, _ = make_queue(f"q-{uuid.uuid4().hex[:8]}")
    uuid_ = mapping(mappings, consumer("raise"), arn, BatchSize=20, MaximumBatchingWindowInSeconds=VISIBILITY + 1)
    wait_for(lambda: clients.client("lambda").get_event_source_mapping(UUID=uuid_)["State"] == "Enabled")
    for i in range(3):
        send(url, {"id": f"m{i}"})
        time.sleep(0.3)  # three separate sends, well inside the window

    rows = wait_for(lambda: len(deliveries(table)) == 3 and deliveries(table), seen=delivered(table, url))
    assert {row["batch"] for row in rows} == {rows[0]["batch"]}, "one invocation for the three"
    assert {row["size"] for row in rows} == {3}, "each message once, though the window outlasts the visibility timeout"
