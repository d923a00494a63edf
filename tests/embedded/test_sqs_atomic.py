"""Requests on one SQS queue are atomic with respect to each other on the embedded backend.

moto 5.2.5's ReceiveMessage lists the visible messages, then marks each one received
(moto/sqs/models.py, `SQSBackend.receive_message`, `Message.mark_received`), with no lock,
while its server handles requests on threads: two receives of one queue at once could both
take one message. Its GetQueueAttributes reads each count at its own instant, so a message
whose visibility timeout ends in between was counted in neither. These tests run moto's real
SQS code, patched as the embedded backend patches it, in a moto server in this process
(loopback, boto3), so that a point inside moto's receive can be held open.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid

import boto3
import pytest
from botocore.config import Config

from idemlab.barrier import all_at_once
from idemlab.embedded import sqs_atomic, sqs_event_source
from idemlab.embedded.server import free_port

# How long the first receiver inside moto's receive waits for a second one to get as far.
# Serialised receives never let the second in: the first goes on after this.
OVERLAP_WAIT_SECONDS = 2
RECEIVERS = 8
ROUNDS = 200
# How often Python may switch threads during the race of many receivers (its default is 5 ms).
SWITCH_SECONDS = 1e-5
# A long poll much longer than a delete and a send take, even on a loaded machine.
LONG_POLL_SECONDS = 20


@pytest.fixture(scope="module")
def sqs():
    """A boto3 SQS client of a moto server in this process, with the embedded backend's SQS patches."""
    from moto.server import ThreadedMotoServer

    sqs_atomic.install()  # as the embedded server installs them (server.py)
    sqs_event_source.install()
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield boto3.client(
        "sqs",
        endpoint_url=f"http://127.0.0.1:{port}",
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(retries={"total_max_attempts": 1}, max_pool_connections=RECEIVERS * 2),
    )
    server.stop()


def queue(sqs, **attributes) -> str:
    return sqs.create_queue(QueueName=f"atomic-{uuid.uuid4().hex[:8]}", Attributes=attributes)["QueueUrl"]


def receive(sqs, url: str) -> list[dict]:
    """One ReceiveMessage that does not wait, its messages' receive counts included."""
    return sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=1, WaitTimeSeconds=0, VisibilityTimeout=30, AttributeNames=["All"]
    ).get("Messages", [])


class Overlap:
    """Where receivers mark a message received: the first to get there waits for a second one
    to get as far (OVERLAP_WAIT_SECONDS at most), so two receives that can overlap inside moto
    provably do."""

    def __init__(self):
        self.lock = threading.Lock()
        self.inside = 0
        self.both_inside = threading.Event()

    def wrap(self, mark_received):
        def held_open(message, *args, **kwargs):
            with self.lock:
                self.inside += 1
                if self.inside == 2:
                    self.both_inside.set()
            self.both_inside.wait(OVERLAP_WAIT_SECONDS)
            return mark_received(message, *args, **kwargs)

        return held_open


def test_two_receives_held_open_inside_moto_at_once_hand_out_a_message_once(sqs, monkeypatch):
    """Without the lock both receivers got there, and both took the message: one answered
    with a receive count of 2, the other with 1."""
    from moto.sqs.models import Message

    url = queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="the only one")
    overlap = Overlap()
    monkeypatch.setattr(Message, "mark_received", overlap.wrap(Message.mark_received))

    answers = all_at_once([lambda: receive(sqs, url)] * 2)

    took = [messages for messages in answers if messages]
    counts = [m["Attributes"]["ApproximateReceiveCount"] for messages in took for m in messages]
    overlapped = overlap.both_inside.is_set()
    assert counts == ["1"], (
        f"{len(took)} receivers took the message (receive counts {counts}); overlapped: {overlapped}"
    )
    assert not overlapped, "the second receive reached moto's mark while the first was still in its receive"


def test_each_message_goes_to_one_of_many_receivers_racing_for_it(sqs):
    """Nothing held open: RECEIVERS receives of one message at once, ROUNDS times. Python
    switches threads every SWITCH_SECONDS here, as often as a loaded machine might preempt the
    server's; without the lock about 1 round in 100 handed its message to two receivers
    (measured: 4 of 300, and 2 of 300 at 1 µs; none in 500 at Python's default of 5 ms)."""
    url = queue(sqs)
    takers = []
    switch = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_SECONDS)
    try:
        for _ in range(ROUNDS):
            sqs.send_message(QueueUrl=url, MessageBody="one")
            answers = all_at_once([lambda: receive(sqs, url)] * RECEIVERS)
            took = [messages for messages in answers if messages]
            takers.append(len(took))
            for messages in took:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=messages[0]["ReceiptHandle"])
    finally:
        sys.setswitchinterval(switch)
    doubled = [(n, count) for n, count in enumerate(takers) if count != 1]
    assert not doubled, f"(round, receivers that took its message) where not exactly one, of {ROUNDS}: {doubled}"


def test_a_message_whose_visibility_timeout_ends_during_an_attribute_read_is_counted(sqs, monkeypatch):
    """The take-home plugin waits for ApproximateNumberOfMessages plus
    ApproximateNumberOfMessagesNotVisible to be 0 before it counts a round's effects. moto
    reads every attribute again for each one it returns (three times for each name asked
    for), each at its own instant: the first count was read while the message was still in
    flight, the second after it had come back, and the queue looked empty. Here moto's clock
    moves on a second with each reading of ApproximateNumberOfMessagesDelayed (between the
    other two), and the message comes back four seconds in: after the reading the first
    count is taken from, before the one the second count is."""
    from moto.sqs import models

    url = queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="in flight")
    assert receive(sqs, url)
    (message,) = models.sqs_backends["123456789012"]["us-east-1"].get_queue(url.rsplit("/", 1)[1])._messages
    clock = [models.unix_time_millis()]

    def delayed(queue) -> int:
        clock[0] += 1000
        return 0

    monkeypatch.setattr(models, "unix_time_millis", lambda: clock[0])  # the clock Message.visible reads
    monkeypatch.setattr(models.Queue, "approximate_number_of_messages_delayed", property(delayed))
    message.visible_at = clock[0] + 4000

    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]

    assert sum(int(attributes[name]) for name in names) == 1, attributes


def test_a_long_poll_waiting_on_a_queue_holds_up_neither_a_delete_nor_a_send(sqs):
    """A receive waiting for messages lets the queue's lock go while it waits (moto waits on the
    queue's own condition, which is the lock): a delete and a send on the queue go through, and
    the waiting receive gets the message sent, long before its wait would have ended."""
    url = queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="in flight")
    (in_flight,) = receive(sqs, url)
    waited = {}

    def long_poll():
        started = time.monotonic()
        answer = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=LONG_POLL_SECONDS)
        waited["seconds"], waited["messages"] = time.monotonic() - started, answer.get("Messages", [])

    poller = threading.Thread(target=long_poll)
    poller.start()
    time.sleep(0.5)  # let the receive begin its wait (it would hold the queue from here on)
    started = time.monotonic()
    sqs.delete_message(QueueUrl=url, ReceiptHandle=in_flight["ReceiptHandle"])
    sqs.send_message(QueueUrl=url, MessageBody="sent while it waited")
    delete_and_send = time.monotonic() - started
    poller.join()

    assert [m["Body"] for m in waited["messages"]] == ["sent while it waited"]
    assert delete_and_send < LONG_POLL_SECONDS / 2 and waited["seconds"] < LONG_POLL_SECONDS / 2, (
        f"delete and send took {delete_and_send:.1f} s, the long poll {waited['seconds']:.1f} s of {LONG_POLL_SECONDS}"
    )
