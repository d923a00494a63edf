"""Re-deliver what waits on a dead-letter queue: ``make redrive``.

Each message goes back to the target it was meant for, at a limited rate, and is deleted
only once its target accepted it; what still cannot be delivered stays on the queue.
Running it twice is safe: the second run finds only what the first could not deliver,
and the consumers are idempotent anyway. It understands dead-letter events of
EventBridge Scheduler and of the deletion workflow (the body is the target's input, the
TARGET_ARN attribute says where it goes) and on-failure records of asynchronous Lambda
invocations (``requestContext.functionArn``, ``requestPayload``); anything else stays
where it is and is reported.

SQS's own StartMessageMoveTask cannot do this: it only moves messages back to a source
queue, and these dead-letter queues have none (SQS API reference, StartMessageMoveTask:
https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_StartMessageMoveTask.html).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field, fields

from idemlab import clients, stack
from idemlab.background.targets import UNIVERSAL_TARGET, DeliveryFailed, deliver

# Deliveries per second: slow enough that a backlog of thousands does not knock over
# the target that just recovered, fast enough to drain a workshop queue in seconds.
DEFAULT_RATE_PER_SECOND = 5.0
# How long a received message stays hidden while this run works through the queue, so
# one run sees each message once; what it leaves is made visible again when it ends.
VISIBILITY_SECONDS = 300
# A target that says the event's work already exists has, in effect, received it.
ALREADY_DELIVERED_CODES = {"ExecutionAlreadyExists"}


@dataclass
class RedriveReport:
    queue_url: str
    delivered: list[str] = field(default_factory=list)  # message ids, deleted from the queue
    already_delivered: list[str] = field(default_factory=list)  # deleted too
    failed: dict[str, str] = field(default_factory=dict)  # message id -> why; left on the queue
    not_understood: list[str] = field(default_factory=list)  # left on the queue

    def summary(self) -> str:
        counts = {outcome.name.replace("_", " "): len(getattr(self, outcome.name)) for outcome in fields(self)[1:]}
        return f"{self.queue_url}: {', '.join(f'{count} {outcome}' for outcome, count in counts.items())}"


def target_of(message: dict) -> tuple[str, str] | None:
    """(target ARN, input) the message was meant for, or None when it does not say."""
    attributes = message.get("MessageAttributes") or {}
    if "TARGET_ARN" in attributes:
        return attributes["TARGET_ARN"]["StringValue"], message["Body"]
    try:
        record = json.loads(message["Body"])
    except ValueError:
        return None
    if isinstance(record, dict) and isinstance(record.get("requestContext"), dict) and "requestPayload" in record:
        # Without a version qualifier such as :$LATEST (what follows a seventh colon).
        function_arn = ":".join(record["requestContext"].get("functionArn", "").split(":")[:7])
        return function_arn, json.dumps(record["requestPayload"])
    return None


def run_once(queue_url: str, rate_per_second: float = DEFAULT_RATE_PER_SECOND, limit: int | None = None):
    """One pass over the queue; a RedriveReport of what happened to each message."""
    if rate_per_second <= 0:
        raise ValueError(f"rate_per_second must be positive, not {rate_per_second}")
    sqs = clients.client("sqs")
    report = RedriveReport(queue_url)
    seen: set[str] = set()  # message ids handled in this pass: a message seen again ends it
    next_slot = time.monotonic()  # when the next delivery may start, at rate_per_second
    left: list[str] = []  # receipt handles of messages that stay on the queue
    try:
        while limit is None or len(seen) < limit:
            batch_size = 10 if limit is None else min(10, limit - len(seen))
            batch = sqs.receive_message(
                QueueUrl=queue_url,
                MessageAttributeNames=["All"],
                WaitTimeSeconds=0,
                MaxNumberOfMessages=batch_size,
                VisibilityTimeout=VISIBILITY_SECONDS,
            ).get("Messages", [])
            fresh = [message for message in batch if message["MessageId"] not in seen]
            if not fresh:
                break
            for message in fresh:
                message_id = message["MessageId"]
                destination = target_of(message)
                seen.add(message_id)
                if destination is None:
                    report.not_understood.append(message_id)
                    left.append(message["ReceiptHandle"])
                    continue
                time.sleep(max(0.0, next_slot - time.monotonic()))
                next_slot = max(next_slot, time.monotonic()) + 1.0 / rate_per_second
                outcome, why = _deliver_once(*destination, message_id)
                if outcome == "failed":
                    report.failed[message_id] = why
                    left.append(message["ReceiptHandle"])
                else:
                    getattr(report, outcome).append(message_id)
                    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    finally:
        for handle in left:
            sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=handle, VisibilityTimeout=0)
    return report


def _deliver_once(target_arn: str, input_text: str, message_id: str) -> tuple[str, str]:
    """("delivered" | "already_delivered" | "failed", why) for one message."""

    def deliver_as(name: str | None) -> tuple[str, str]:
        try:
            deliver(target_arn, input_text, execution_name=name)
        except DeliveryFailed as exc:
            return ("already_delivered", "") if exc.code in ALREADY_DELIVERED_CODES else ("failed", str(exc))
        return "delivered", ""

    # A Scheduler event names its own execution (the universal target's Name): that name
    # is tried first. If its execution exists but ended without going on (it failed, timed
    # out or was stopped, e.g. before it could claim), the name proves nothing was done.
    if UNIVERSAL_TARGET.match(target_arn):
        outcome = deliver_as(None)
        if outcome[0] != "already_delivered" or _named_execution_went_on(input_text):
            return outcome
    # Named after the message: one delivered but not deleted (a crash in between) is refused the next time.
    return deliver_as(f"redrive-{message_id}")


def _named_execution_went_on(input_text: str) -> bool:
    """True when the execution a startExecution event names is running or succeeded."""
    parameters = {key.lower(): value for key, value in json.loads(input_text).items()}
    machine = parameters.get("statemachinearn", "")
    name = parameters.get("name", "")
    execution_arn = machine.replace(":stateMachine:", ":execution:", 1) + f":{name}"
    status = clients.client("stepfunctions").describe_execution(executionArn=execution_arn)["status"]
    return status in ("RUNNING", "SUCCEEDED")


def _queue_urls(names: list[str]) -> list[str]:
    """URLs as given, or the stack's queues by key (``deletion_dlq``); default: every ``*_dlq``."""
    if names and all("://" in name for name in names):
        return names
    queues = stack.outputs()["queues"]
    urls = [queues.get(key, key) for key in names or sorted(key for key in queues if key.endswith("_dlq"))]
    if unknown := [url for url in urls if "://" not in url]:
        raise SystemExit(f"redrive: no queue {', '.join(unknown)} in the stack; known: {', '.join(sorted(queues))}")
    return urls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m idemlab.background.redrive", description=__doc__.split("\n\n")[0])
    parser.add_argument("queues", nargs="*", help="queue URLs or stack queue keys (default: every *_dlq of the stack)")
    parser.add_argument("--rate", type=float, default=DEFAULT_RATE_PER_SECOND, help="deliveries per second")
    parser.add_argument("--limit", type=int, default=None, help="at most this many messages per queue")
    args = parser.parse_args(argv)
    failed = 0
    for url in _queue_urls(args.queues):
        report = run_once(url, rate_per_second=args.rate, limit=args.limit)
        print(f"redrive: {report.summary()}")
        for message_id, why in report.failed.items():
            print(f"redrive:   {message_id} left on the queue: {why}", file=sys.stderr)
        failed += len(report.failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
