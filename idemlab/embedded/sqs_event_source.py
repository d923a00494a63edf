"""SQS -> Lambda event source mappings that behave as Lambda's pollers do.

moto 5.2.5 invokes the function inside SendMessage, once per message (moto/sqs/models.py
`Queue.add_message`, moto/awslambda/models.py `send_sqs_batch`): no batches or batching
window, `ApproximateReceiveCount` always "1", a failed message visible again at once,
`batchItemFailures` ignored; and its FIFO deduplication forgets an id once the message
is deleted. Here instead:

- SendMessage only stores the message. FIFO deduplication remembers every id for five
  minutes, deleted or not (SQS developer guide, FIFO-key-terms.html), per queue or per
  message group (DeduplicationScope).
- One poller thread per enabled mapping receives through this server's own SQS API (so
  receive counts, visibility timeouts, FIFO group locks and the redrive after
  maxReceiveCount apply), gathers up to BatchSize messages within
  MaximumBatchingWindowInSeconds (FIFO: one receive, no window), and invokes the function
  through the Invoke path, so concurrency limits apply.
- Success deletes the batch; a function error, a throttle or an invalid partial batch
  response deletes nothing (the batch comes back after the visibility timeout); with
  ReportBatchItemFailures only the listed messages stay (Lambda developer guide,
  services-sqs-errorhandling.html).
- A FIFO group is locked only while one of its messages is in flight, so a failed group
  comes back whole and in order; a mapping being disabled reports "Disabling" until its
  poller has stopped, as Lambda (and LocalStack) report it.

Known differences from AWS: one batch in flight per mapping (AWS runs several pollers
and scales them, ScalingConfig), and no FilterCriteria.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import math
import sys
import threading
import time
import uuid

from idemlab.embedded import sqs_atomic
from idemlab.embedded.patching import every, wrap

# SQS's FIFO deduplication interval (SendMessage API reference, MessageDeduplicationId).
DEDUPLICATION_SECONDS = 300
# Lambda's default BatchSize and its limits (services-sqs-parameters.html): 10 on a FIFO
# queue, 10,000 on a standard one; ReceiveMessage returns at most 10 messages a call.
DEFAULT_BATCH_SIZE = MAX_FIFO_BATCH_SIZE = MAX_RECEIVE = 10
MAX_BATCH_SIZE = 10_000
# A long poll of one second: an idle mapping costs one request a second, a new message is
# picked up at once, and one that becomes visible again within about a second.
LONG_POLL_SECONDS = 1
# How often a FIFO long poll looks again at a queue holding messages it may not take yet
# (in flight, or behind one in flight): an empty one is waited on until a send.
FIFO_POLL_SECONDS = 0.05
# How often the supervisor looks for mappings created, enabled, disabled or deleted.
SUPERVISE_SECONDS = 0.5


def failed_item_ids(payload: bytes, batch_ids: set[str]) -> set[str] | None:
    """The message ids a partial batch response lists; None when the response is invalid.

    Complete success: an empty or null response, or an empty or null batchItemFailures.
    Complete failure (None): a response that is not JSON, or an item whose
    itemIdentifier is missing, empty, null or not a message of the batch
    (Lambda developer guide, services-sqs-errorhandling.html, "Success and failure
    conditions").
    """
    try:
        response = json.loads(payload) if payload.strip() else None
    except ValueError:
        return None
    if response and not isinstance(response, dict):
        return None
    failures = (response or {}).get("batchItemFailures") or []
    if not isinstance(failures, list):
        return None
    failed = {item.get("itemIdentifier") if isinstance(item, dict) else None for item in failures}
    return failed if all(isinstance(i, str) and i in batch_ids for i in failed) else None


def lambda_record(message: dict, queue_arn: str, region: str) -> dict:
    """One SQS message as Lambda hands it to a function (with-sqs.html, example event):
    attribute keys in camel case, binary values in base64."""

    def attribute(value: dict) -> dict:
        return {
            **({"stringValue": value["StringValue"]} if "StringValue" in value else {}),
            **({"binaryValue": base64.b64encode(value["BinaryValue"]).decode()} if "BinaryValue" in value else {}),
            "stringListValues": value.get("StringListValues", []),
            "binaryListValues": [base64.b64encode(item).decode() for item in value.get("BinaryListValues", [])],
            "dataType": value["DataType"],
        }

    record = {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": dict(message.get("Attributes") or {}),
        "messageAttributes": {name: attribute(v) for name, v in message.get("MessageAttributes", {}).items()},
        "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }
    if message.get("MD5OfMessageAttributes"):
        record["md5OfMessageAttributes"] = message["MD5OfMessageAttributes"]
    return record


def one_message_event(body: str, queue_arn: str, region: str) -> dict:
    """What Lambda hands a function that SQS feeds for one message just sent with `body`
    (a message id and receipt handle of its own, received once)."""
    message = {
        "MessageId": str(uuid.uuid4()),
        "ReceiptHandle": uuid.uuid4().hex,
        "Body": body,
        "MD5OfBody": hashlib.md5(body.encode()).hexdigest(),  # SQS's checksum of the body, as a message carries it
        "Attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": str(int(time.time() * 1000))},
    }
    return {"Records": [lambda_record(message, queue_arn, region)]}


class MappingPoller:
    """Polls one queue for one mapping and invokes its function, one batch at a time."""

    def __init__(self, mapping, client_factory, invoke, endpoint_url: str):
        self.mapping = mapping
        self.invoke = invoke
        _, _, _, self.region, account, name = mapping.event_source_arn.split(":", 5)
        self.sqs = client_factory("sqs", self.region)
        self.queue_url = f"{endpoint_url}/{account}/{name}"
        self.fifo = name.endswith(".fifo")
        self.stopped = threading.Event()

    def collect(self) -> list[dict]:
        """Up to BatchSize messages: an idle queue is long-polled, the batching window opens
        with the first message, and the batch is full or the window over (FIFO: at once)."""
        batch_size = int(self.mapping.batch_size)  # moto's default for SQS is Lambda's, 10
        window = 0 if self.fifo else int(self.mapping.max_batch_window or 0)
        batch: list[dict] = []
        deadline = None
        while not self.stopped.is_set():
            left = LONG_POLL_SECONDS if deadline is None else math.ceil(deadline - time.monotonic())
            messages = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MessageAttributeNames=["All"],
                MessageSystemAttributeNames=["All"],
                MaxNumberOfMessages=min(MAX_RECEIVE, batch_size - len(batch)),
                WaitTimeSeconds=max(0, min(LONG_POLL_SECONDS, left)),
            ).get("Messages", [])
            # A window longer than the visibility timeout can see a message come back
            # while the batch is still gathering: keep it once, with its newest handle.
            fresh = {m["MessageId"] for m in messages}
            batch = [m for m in batch if m["MessageId"] not in fresh] + messages
            if not batch:
                return []
            deadline = deadline or time.monotonic() + window
            if len(batch) >= batch_size or time.monotonic() >= deadline:
                break
            if not messages:
                self.stopped.wait(0.05)
        return batch

    def run_once(self) -> None:
        """Invoke the function with one batch, then delete what it processed (see above)."""
        if not (batch := self.collect()):
            return
        event = {"Records": [lambda_record(m, self.mapping.event_source_arn, self.region) for m in batch]}
        try:
            result = self.invoke(self.mapping.function_arn, json.dumps(event).encode())
        except Exception:  # a throttle, or the runtime failing
            return
        reports = "ReportBatchItemFailures" in (self.mapping.function_response_types or [])
        keep = failed_item_ids(result.payload, {m["MessageId"] for m in batch}) if reports else set()
        if result.function_error or keep is None:
            return
        done = [m for m in batch if m["MessageId"] not in keep]
        entries = [{"Id": m["MessageId"], "ReceiptHandle": m["ReceiptHandle"]} for m in done]
        for start in range(0, len(entries), MAX_RECEIVE):
            self.sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=entries[start : start + MAX_RECEIVE])

    def loop(self) -> None:
        _polling.add(self.mapping.uuid)
        try:
            while not self.stopped.is_set():
                try:
                    self.run_once()
                except Exception as exc:  # the queue went away, or the server is stopping
                    if not self.stopped.is_set():
                        print(f"embedded: SQS mapping {self.mapping.uuid}: {exc}", file=sys.stderr)
                        self.stopped.wait(LONG_POLL_SECONDS)
        finally:
            _polling.discard(self.mapping.uuid)


class SqsEventSources:
    """Starts a poller for each enabled SQS mapping, stops it when the mapping goes (or at `stop`)."""

    def __init__(self, client_factory, invoke, endpoint_url: str):
        self._poller_args = client_factory, invoke, endpoint_url  # each MappingPoller's, after its mapping
        self._pollers: dict[str, MappingPoller] = {}
        self._stop = every(SUPERVISE_SECONDS, self.supervise_once, "SQS mapping supervisor")

    def supervise_once(self) -> None:
        from moto.awslambda.models import lambda_backends

        backends = [backend for regions in list(lambda_backends.values()) for backend in list(regions.values())]
        mappings = [m for backend in backends for m in list(backend._event_source_mappings.values())]
        enabled = [m for m in mappings if _is_sqs(m.event_source_arn) and m.enabled not in (False, "false", "False")]
        wanted = {m.uuid: m for m in enabled}
        for mapping_id in set(self._pollers) - set(wanted):
            self._pollers.pop(mapping_id).stopped.set()
        for mapping_id in set(wanted) - set(self._pollers):
            poller = self._pollers[mapping_id] = MappingPoller(wanted[mapping_id], *self._poller_args)
            threading.Thread(target=poller.loop, name=f"sqs-esm-{mapping_id[:8]}", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        for poller in self._pollers.values():
            poller.stopped.set()


def _is_sqs(arn: str) -> bool:
    return arn.split(":")[2] == "sqs"


# -- moto patches --------------------------------------------------------------------

# Mappings whose poller is still running: one being disabled finishes the batch in hand
# first, and until then its State is "Disabling", as Lambda reports it.
_polling: set[str] = set()
_CATCHING_UP = {("Disabled", True): "Disabling", ("Enabled", False): "Enabling"}


def _mapping_state(original, self) -> dict:
    """EventSourceMapping.get_configuration: "Disabling" and "Enabling" while the poller catches up."""
    config = original(self)
    state = (config.get("State"), self.uuid in _polling)
    if _is_sqs(self.event_source_arn) and state in _CATCHING_UP:
        config["State"] = _CATCHING_UP[state]
    return config


_sequence = itertools.count(int(time.time() * 1000) * 1000)


def _add_message(self, message) -> None:
    """Replacement for moto's Queue.add_message: store (or deduplicate), never invoke.

    The deduplication id is moto's send_message's (content-based ones too). A message
    that was received before is one SQS moves to this (dead-letter) queue after
    maxReceiveCount, not a new send: it is never deduplicated."""
    with self._messages_lock:
        if self.fifo_queue and message.deduplication_id is not None:
            per_group = self.attributes.get("DeduplicationScope") == "messageGroup"
            key = (message.group_id if per_group else None, message.deduplication_id)
            seen = self.__dict__.setdefault("_idemlab_deduplication", {})
            now = time.time()
            for old in [k for k, (at, _) in seen.items() if now - at >= DEDUPLICATION_SECONDS]:
                del seen[old]
            if key in seen and not message.approximate_receive_count:
                # Accepted, not delivered; the caller is told the first copy's id
                # (as LocalStack's SQS does: services/sqs/models.py, FifoQueue.put).
                message.id = seen[key][1]
                return
            seen.setdefault(key, (now, message.id))
        if self.fifo_queue and not message.sequence_number:
            message.sequence_number = str(next(_sequence)).rjust(20, "0")
        self._messages.append(message)
        self._messages_lock.notify_all()


def _receive_in_group_order(original, self, queue_name, count, wait_seconds_timeout, visibility_timeout, names=None):
    """A FIFO group is locked only while one of its messages is in flight.

    moto treats a message whose visibility timeout ran out as still in flight until its
    receive loop reaches it, so the message after it in the same group is skipped and
    the later one is handed out first: after a failed batch, the group comes back out of
    order. Timed-out messages are released before every pass over the queue, so a long
    poll that is already waiting when they come back keeps the group's order too: the
    wait is made here, of passes that do not wait. A pass judges every message's
    visibility at one instant (sqs_atomic.at_one_instant), or one that comes back between the
    release and moto's loop would be released by that loop, out of order, after all.
    """
    queue = self.get_queue(queue_name)
    if not queue.fifo_queue:
        return original(self, queue_name, count, wait_seconds_timeout, visibility_timeout, names)
    deadline = time.monotonic() + (wait_seconds_timeout or 0)
    while True:
        with sqs_atomic.at_one_instant():
            for message in [m for m in queue.pending_messages if m.visible]:
                queue.pending_messages.discard(message)
            received = original(self, queue_name, count, 0, visibility_timeout, names)
        if received or (left := deadline - time.monotonic()) <= 0:
            return received
        with queue._messages_lock:  # an empty queue: wait for a send (it notifies), not for the clock
            queue._messages_lock.wait(min(FIFO_POLL_SECONDS, left) if queue._messages else left)


def _check_mapping(backend, source_arn: str, function_name: str, spec: dict, current=None) -> None:
    """Refuse what Lambda refuses when an SQS mapping is created or updated."""
    from moto.core.exceptions import JsonRESTError
    from moto.sqs.models import sqs_backends

    if not _is_sqs(source_arn):
        return
    _, _, _, region, account, name = source_arn.split(":", 5)
    fifo = name.endswith(".fifo")
    batch_size = int(spec.get("BatchSize") or getattr(current, "batch_size", None) or DEFAULT_BATCH_SIZE)
    window = int(spec.get("MaximumBatchingWindowInSeconds", getattr(current, "max_batch_window", None)) or 0)
    # services-sqs-parameters.html: BatchSize up to 10 (FIFO) or 10,000; above 10 needs
    # a batching window of at least one second; FIFO queues have no batching window.
    # services-sqs-configure.html: the function timeout must not exceed the queue's
    # visibility timeout; Lambda checks when the mapping is created or updated.
    if not 1 <= batch_size <= (MAX_FIFO_BATCH_SIZE if fifo else MAX_BATCH_SIZE):
        refusal = f"BatchSize {batch_size} is out of range for {'a FIFO' if fifo else 'an SQS'} queue."
    elif batch_size > MAX_RECEIVE and window < 1:
        refusal = "Maximum batch window in seconds must be greater than 0 if maximum batch size is greater than 10"
    elif fifo and window > 0:
        refusal = "Batching window is not supported for FIFO queues"
    else:
        timeout = int(backend.get_function(function_name).timeout or 3)
        visibility = int(sqs_backends[account][region].get_queue(name).visibility_timeout or 30)
        if timeout <= visibility:
            return
        refusal = f"Queue visibility timeout: {visibility} seconds is less than Function timeout: {timeout} seconds"
    raise JsonRESTError("InvalidParameterValueException", refusal)


def _create_mapping(original, self, spec):
    if spec.get("EventSourceArn") and spec.get("FunctionName"):
        _check_mapping(self, spec["EventSourceArn"], spec["FunctionName"], spec)
    return original(self, spec)


def _update_mapping(original, self, uuid, spec):
    current = self.get_event_source_mapping(uuid)
    if current is not None:
        _check_mapping(self, current.event_source_arn, spec.get("FunctionName") or current.function_arn, spec, current)
    return original(self, uuid, spec)


def install() -> None:
    """Patch moto in this process; a second call changes nothing."""
    from moto.awslambda.models import EventSourceMapping, LambdaBackend
    from moto.sqs.models import Queue, SQSBackend

    sqs_atomic.install()  # the FIFO passes judge visibility at one instant
    Queue.add_message = _add_message
    wrap(SQSBackend, "receive_message")(_receive_in_group_order)
    wrap(LambdaBackend, "create_event_source_mapping")(_create_mapping)
    wrap(LambdaBackend, "update_event_source_mapping")(_update_mapping)
    wrap(EventSourceMapping, "get_configuration")(_mapping_state)
