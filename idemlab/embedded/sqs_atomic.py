"""Make every request on an SQS queue atomic with respect to every other one on that queue.

moto 5.2.5's SQS models change a queue's messages with no lock of their own
(moto/sqs/models.py), while its server handles requests on threads:

- `SQSBackend.receive_message` lists the visible messages, then marks each one received
  (`Message.mark_received`: the receive count, a new receipt handle, the visibility
  timeout) and deep-copies it for the answer. Two receives of one queue at once both took
  one message, and answered with whatever receive count it had by the time each copied it
  (tests/embedded/test_sqs_atomic.py holds two receives open inside moto at once: both took
  the message, one reporting a receive count of 2, the other 1). From reading the same code
  (not reproduced): two that both find a timed-out message still pending can both remove
  it (a KeyError, HTTP 500), and two can both move one message to the dead-letter queue (a
  ValueError).
- `Queue.delete_message` rebuilds the message list and assigns it back: a message sent
  after the rebuild and before the assignment is lost (from reading the code).
- GetQueueAttributes reads every count at its own instant (moto works all of them out
  three times for each name asked for), so a message whose visibility timeout ended between
  the reading of ApproximateNumberOfMessages and that of ApproximateNumberOfMessagesNotVisible
  was counted in neither, and a queue holding a message looked empty. The take-home plugin
  waits for those two to add up to 0 before it counts a round's effects: it counted a round
  whose message was about to come back, and that message took the next round's crash
  (issue 34; tests/embedded/test_sqs_atomic.py reads the counts across the moment).

Here each SQS request that names a queue holds that queue's lock while moto serves it, and
judges every message's visibility at one instant. The lock is the queue's own condition
(`Queue._messages_lock`, a `threading.Condition` over a reentrant lock), which SendMessage
already takes; moto's long polls wait on it (`Queue.wait_for_messages`, and the FIFO passes
of sqs_event_source.py), and waiting lets it go, so a receive that is waiting for messages
holds up no one.

What AWS promises, and what the lessons' tests may therefore assume: a standard queue
delivers each message at least once; "on rare occasions" a copy SQS failed to delete comes
back on a later receive, so "design your applications to be idempotent" (SQS developer guide,
standard-queues-at-least-once-delivery.html). The counts are approximate too
(GetQueueAttributes API reference). Before this module the embedded backend could hand one
message to two receives that overlapped, both inside the visibility timeout; a duplicate of
that kind is allowed by AWS's promise, but it came from a race of moto's threads, not from
anything a lesson set up, and nothing counted it. Now it hands a message to one receiver at a
time, and again only after its visibility timeout (or a ChangeMessageVisibility) lets it be
seen, each time with a receive count one higher, and a reading of the counts is exact at its
instant. A test may rely on that to count deliveries it caused (a producer sending twice, a
crash before the delete, a visibility timeout shorter than the work, a partial batch
failure); no test, lesson or consumer may rely on a standard queue never duplicating a
message on its own: on AWS it may, and the embedded backend never does.
"""

from __future__ import annotations

import contextlib
import threading

from idemlab.embedded.patching import wrap

# The instant the running request judges visibility by, in moto's milliseconds (per
# thread; None outside such a request: moto reads its clock each time).
_instant = threading.local()


@contextlib.contextmanager
def at_one_instant():
    """Within: every message's visibility (and delay) is judged at the instant this began."""
    from moto.sqs import models  # the clock moto's Message.visible and Message.delayed read

    outer = getattr(_instant, "now", None)
    _instant.now = models.unix_time_millis()
    try:
        yield
    finally:
        _instant.now = outer


def queue_lock(response):
    """The lock of the queue an SQS request names (moto's SQSResponse, set up for the request);
    None for a request that names no existing queue (CreateQueue, ListQueues, or an unknown
    queue, which moto answers with its own error)."""
    try:
        return response.sqs_backend.get_queue(response._get_queue_name())._messages_lock
    except Exception:
        return None


def install() -> None:
    """Patch moto in this process; a second call changes nothing."""
    from moto.sqs.models import Message, SQSBackend
    from moto.sqs.responses import SQSResponse

    @wrap(SQSResponse, "call_action")
    def one_request_per_queue_at_a_time(original, self):
        lock = queue_lock(self)
        if lock is None:
            return original(self)
        with lock:
            return original(self)

    @wrap(SQSBackend, "get_queue_attributes")
    def attributes_at_one_instant(original, self, queue_name, attribute_names):
        with at_one_instant():
            return original(self, queue_name, attribute_names)

    @wrap(Message, "visible")
    def visible(original, message) -> bool:
        now = getattr(_instant, "now", None)
        return original(message) if now is None else now > message.visible_at

    @wrap(Message, "delayed")
    def delayed(original, message) -> bool:
        now = getattr(_instant, "now", None)
        return original(message) if now is None else now < message.delayed_until
