"""What a delivery did, copy by copy, and the failure message a learner reads.

Times are wall-clock seconds (time.time()) taken in the test process (sent, answered)
and in the worker (handler started, ended): one machine, one clock.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from idemlab.testing.handlers import Crash, Queue

# Rounds listed by number, and timelines drawn, in a failure message: enough to see
# the pattern, short enough to read.
LISTED_ROUNDS = 20
DRAWN_TIMELINES = 2
SHOWN_VALUE_CHARACTERS = 70
# Where the plugin's own code runs in the worker: its frames are hidden from a handler's traceback.
BOOTSTRAP_FILE = "idemlab_testing_bootstrap.py"


def _short(value: object) -> str:
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= SHOWN_VALUE_CHARACTERS else text[: SHOWN_VALUE_CHARACTERS - 3] + "..."


@dataclass
class CopyResult:
    """One copy of the event: when it went, what the worker did, what came back."""

    number: int
    sent: float
    answered: float = 0.0
    pid: int | None = None
    started: float | None = None  # the handler under test, in the worker
    ended: float | None = None
    result: object = None
    error: dict | None = None  # Lambda's error payload: errorType, errorMessage, stackTrace
    powertools: bool = False  # the worker had loaded Powertools' idempotency utility
    code_root: str | None = None  # where the handler's files are on this machine, for its traceback
    message_id: str | None = None  # delivered through a queue: the message this copy was
    attempts: int | None = None  # invoked asynchronously: Lambda's attempts, retries included
    condition: str | None = None  # and how it ended: Success, RetriesExhausted, EventAgeExceeded

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def error_type(self) -> str | None:
        return self.error.get("errorType") if self.error else None

    @property
    def outcome_is_summed(self) -> bool:
        """Delivered through a queue or an async invoke: only the last attempt is seen."""
        return self.message_id is not None or self.attempts is not None

    def crashed(self, crash: Crash | None) -> bool:
        return crash is not None and self.error_type == crash.error_type

    def outcome(self, crash: Crash | None) -> str:
        if self.message_id is not None:  # the poller's invocations are not seen one by one
            if not self.ok:
                return f"message {self.message_id}: {self.error_type}: {self.error.get('errorMessage')}"
            return f"message {self.message_id}: handled (the queue was empty when answered)"
        if self.attempts is not None:  # the last of Lambda's attempts
            tried = f"{_times(self.attempts).replace('time', 'attempt')}, {self.condition}: "
            return tried + (
                "returned " + _short(self.result) if self.ok else f"failed: {self.error_type} (its error below)"
            )
        if self.ok:
            return "returned " + _short(self.result)
        if self.crashed(crash):
            return f"CRASHED: {crash.describe()} ({self.error_type})"
        return f"failed: {self.error_type} (its error below)"

    def error_text(self) -> list[str]:
        """The handler's error, uncut, after its own traceback (the plugin's frames hidden)."""
        frames = [frame for frame in self.error.get("stackTrace") or [] if not _hidden_frame(frame)]
        if self.code_root:  # the worker's copy of the code is the user's folder, zipped
            frames = [frame.replace('"/var/task/', f'"{self.code_root}/') for frame in frames]
        lines = (
            [
                "Traceback (the handler's own frames; the plugin's and libraries' hidden):",
                *(f.rstrip("\n") for f in frames),
            ]
            if frames
            else []
        )
        return [*lines, f"{self.error_type}: {self.error.get('errorMessage', '')}"]


def _hidden_frame(frame: str) -> bool:
    """A traceback frame of the plugin's bootstrap or of an installed library (boto3, botocore)."""
    first = frame.lstrip().split("\n", 1)[0]
    return BOOTSTRAP_FILE in first or "/site-packages/" in first or "/dist-packages/" in first


@dataclass
class Delivery:
    """The copies of one event, and how many armed crashes went off."""

    copies: list[CopyResult]
    crash: Crash | None = None
    crashes: int = 0

    @property
    def results(self) -> list:
        """What each copy returned (None for a copy that failed)."""
        return [copy.result for copy in self.copies]

    @property
    def failed(self) -> list[CopyResult]:
        """The copies that failed with an error of their own (not the armed crash)."""
        return [copy for copy in self.copies if not copy.ok and not copy.crashed(self.crash)]

    @property
    def all_failed(self) -> bool:
        """No copy returned, and at least one failed by itself: the handler's error, not a duplicate."""
        return not any(copy.ok for copy in self.copies) and bool(self.failed)

    def timeline(self) -> list[str]:
        origin = min(copy.sent for copy in self.copies)

        def ms(moment: float) -> str:
            return f"{(moment - origin) * 1000:+.0f}"

        lines = ["  copy  pid      sent (ms)  handler ran (ms)   answered (ms)  outcome"]
        for c in self.copies:
            ran = f"{ms(c.started)} .. {ms(c.ended)}" if c.started is not None else "-"
            times = f"{ms(c.sent):>9}  {ran:<17}  {ms(c.answered):>13}"
            lines.append(f"  {c.number:<4}  {c.pid or '-':<7}  {times}  {c.outcome(self.crash)}")
        if self.crash is not None and self.crashes and any(c.outcome_is_summed for c in self.copies):
            # A queue's or an async invoke's failed attempts are not seen one by one: say the crash happened.
            again = (
                "the poller's batch failed; its messages came back after the visibility timeout"
                if any(c.message_id is not None for c in self.copies)
                else "Lambda retried the event"
            )
            lines.append(
                f"  CRASHED {_times(self.crashes)}: {self.crash.describe()} ({self.crash.error_type}); {again}."
            )
        ran = [c for c in self.copies if c.started is not None]
        if len(ran) >= 2 and max(c.started for c in ran) < min(c.ended for c in ran):
            lines.append("  The handler ran in several copies at the same time (their 'handler ran' times overlap).")
        for copy in _distinct_errors(self.failed):
            lines += ["", f"  Copy {copy.number}'s error:", *(f"    {line}" for line in copy.error_text())]
        return lines


def _distinct_errors(copies: list[CopyResult]) -> list[CopyResult]:
    """One copy per different error (type and message): the same failure twice says nothing new."""
    seen, distinct = set(), []
    for copy in copies:
        key = (copy.error_type, copy.error.get("errorMessage"))
        if key not in seen:
            seen.add(key)
            distinct.append(copy)
    return distinct


@dataclass
class Round:
    number: int
    event: object
    delivery: Delivery
    count: int | dict[str, int]  # the effect, counted after the round; or each named effect's count

    @property
    def counts(self) -> dict[str, int]:
        """Each effect's count by name ("" for a single, unnamed effect)."""
        return dict(self.count) if isinstance(self.count, dict) else {"": self.count}

    @property
    def once(self) -> bool:
        return all(value == 1 for value in self.counts.values())

    @property
    def more(self) -> bool:
        return any(value > 1 for value in self.counts.values())

    @property
    def less(self) -> bool:
        return any(value < 1 for value in self.counts.values())

    def said(self) -> str:
        """ "2 times", or "bonus 2 times, email 1 time"."""
        return ", ".join(f"{name} {_times(value)}".strip() for name, value in self.counts.items())


def _times(count: int) -> str:
    return f"{count} time{'s' if count != 1 else ''}"


@dataclass
class EffectReport:
    """Rounds of `copies` copies each, and the effect counted after each round (once is right)."""

    handler: str
    copies: int
    together: bool
    crash: Crash | None
    rounds: list[Round] = field(default_factory=list)
    timeout: int | None = None  # the function's timeout, seconds
    # After copies sent together doubled: one more event's copies sent one after another,
    # which tells a handler that checks nothing from a check-then-act race.
    apart_check: Round | None = None
    queue: Queue | None = None  # delivered through an SQS queue instead of Invoke
    asynchronous: bool = False  # invoked with InvocationType=Event: Lambda retries a failed event

    @property
    def bad_rounds(self) -> list[Round]:
        return [r for r in self.rounds if not r.once]

    @property
    def passed(self) -> bool:
        return bool(self.rounds) and not self.bad_rounds

    def doubled(self) -> list[int]:
        """Numbers of the rounds where the effect happened more than once."""
        return [r.number for r in self.rounds if r.more]

    def lost(self) -> list[int]:
        """Numbers of the rounds where the effect did not happen, though a copy returned or crashed."""
        return [r.number for r in self.rounds if r.less and not r.delivery.all_failed]

    def failed(self) -> list[int]:
        """Numbers of the rounds where no copy returned and the effect was not once: the handler's own error."""
        return [r.number for r in self.bad_rounds if r.delivery.all_failed and not r.more]

    def _how(self) -> str:
        if self.queue is not None:
            return f"{self.copies} cop{'ies' if self.copies != 1 else 'y'} of each event {self.queue.describe()}"
        if self.asynchronous:
            return f"{self.copies} cop{'ies' if self.copies != 1 else 'y'} of each event invoked asynchronously"
        how = f"{self.copies} cop{'ies' if self.copies != 1 else 'y'} of each event sent "
        how += "together" if self.together and self.copies > 1 else "one after another" if self.copies > 1 else "alone"
        return how + (f", and {self.crash.describe()}" if self.crash else "")

    def message(self) -> str:
        total = len(self.rounds)
        if self.passed:
            return "\n".join(
                [
                    f"{self.handler}: passed: the effect happened exactly once in each of {total} rounds "
                    f"({self._how()}).",
                    *self._failed_copies_note(),
                ]
            )
        failed = self.failed()
        if len(failed) == len(self.bad_rounds):
            return "\n".join(self._every_copy_failed(failed))
        parts = [f"happened MORE than once in {len(self.doubled())} of {total} rounds"] if self.doubled() else []
        parts += [f"was LOST in {len(self.lost())} of {total} rounds"] if self.lost() else []
        parts += [f"failed in every copy in {len(failed)} of {total} rounds"] if failed else []
        lines = [f"{self.handler}: the effect was not exactly once. It {' and '.join(parts)} ({self._how()}).", ""]
        lines.append("Effect counted after each round:")
        names = list(dict.fromkeys(name for r in self.rounds for name in r.counts))
        for name in names:
            for count in sorted({r.counts[name] for r in self.rounds if name in r.counts}):
                numbers = [r.number for r in self.rounds if r.counts.get(name) == count]
                listed = ", ".join(map(str, numbers[:LISTED_ROUNDS])) + (
                    ", ..." if len(numbers) > LISTED_ROUNDS else ""
                )
                mark, rounds, label = "ok" if count == 1 else "WRONG", len(numbers), f"{name}: " if name else ""
                lines.append(f"  {label}{_times(count)}: {rounds:>4} rounds  {mark}  (rounds {listed})")
        for r in self.bad_rounds[:DRAWN_TIMELINES]:
            lines += ["", f"Round {r.number}, event {_short(r.event)}: effect counted {r.said()}. Timeline:"]
            lines += r.delivery.timeline()
        if self.doubled():
            lines += ["", self._doubled_hint()]
        if self.lost():
            lines += ["", self._lost_hint()]
        return "\n".join(lines)

    def _failed_copies_note(self) -> list[str]:
        copies = [copy for r in self.rounds for copy in r.delivery.failed]
        if not copies:
            return []
        note = [f"{len(copies)} copies failed with an error of their own (the effect still happened once):"]
        by_type: dict[str, list[CopyResult]] = {}
        for copy in copies:  # one example per error type: their messages often differ only by a key
            by_type.setdefault(str(copy.error_type), []).append(copy)
        for error_type, same in by_type.items():
            note += [
                f"  {len(same)} with {error_type}, for example:",
                *(f"    {line}" for line in same[0].error_text()),
            ]
        return note

    def _every_copy_failed(self, failed: list[int]) -> list[str]:
        """The handler's error is the news: no advice on duplicates, which never got a chance."""
        lines = [
            f"{self.handler}: every copy failed in {len(failed)} of {len(self.rounds)} rounds ({self._how()}), "
            "so there was no effect to count. The handler's error:"
        ]
        first = next(r for r in self.rounds if r.number == failed[0])
        copies = _distinct_errors([copy for r in self.bad_rounds for copy in r.delivery.failed])
        for copy in copies:
            lines += ["", *copy.error_text()]
        if any(copy.error_type == "Sandbox.Timedout" for copy in copies):
            lines += [
                "",
                f"The handler ran past the function's timeout (timeout={self.timeout} s): it did not finish "
                "in time. Find what it waits on, or pass a larger timeout= to deliver/assert_exactly_once.",
            ]
        lines += [
            "",
            f"Round {first.number}, event {_short(first.event)}. Timeline:",
            *first.delivery.timeline()[: 1 + self.copies],
        ]
        return lines

    def _doubled_hint(self) -> str:
        crash = self.crash
        rounds = [r for r in self.rounds if r.more]
        if (
            crash is not None
            and crash.how == "timeout"
            and any(c.powertools for r in rounds for c in r.delivery.copies)
        ):
            return (
                "Powertools' @idempotent recorded an in-progress record, "
                f"then the copy timed out ({crash.describe()}).\n"
                "That in-progress record expires with the invocation's remaining time, which the function's timeout "
                f"sets (timeout={self.timeout} s here;\nLambda's Timeout on AWS): "
                "the retry, after the timeout, finds it "
                "expired and runs the handler again. Pass the idempotency\nkey to the downstream call, so that it does "
                "its effect once per key even when called twice."
            )
        if crash is not None and (self.queue is not None or self.asynchronous):
            again = (
                "SQS made its message visible again after the visibility timeout, the poller delivered it again"
                if self.queue is not None
                else "Lambda retried the event (an asynchronous invoke is retried up to twice)"
            )
            return (
                f"A copy died ({crash.describe()}) {'after doing the effect' if crash.when == 'after' else 'part-way'} "
                "but before recording that it was done: "
                f"its invocation failed,\nso {again}, and the handler did the effect again. "
                "Claim the event's own key with a conditional write\nbefore the effect (or use Powertools' "
                "@idempotent), and pass an idempotency key to the downstream call."
            )
        retried = [c for r in rounds for c in r.delivery.copies if (c.attempts or 0) > 1]
        if retried:
            most = max(c.attempts for c in retried)
            return (
                f"Lambda retried the event after the handler failed (up to {most} attempts): "
                "what the handler did before\n"
                "failing, it did again on each retry. "
                "Claim the event's key with a conditional write before the effect,\n"
                "so that a retry sees it done, and record the failure after the effect apart from the effect."
            )
        if self.queue is not None:
            return (
                "Each copy was a message of its own, with its own message id, "
                "and the handler did the effect for each.\n"
                "A record keyed on the message id (or the record's messageId) cannot see that two messages carry one\n"
                "event: claim the event's own key (an order id, say) with a conditional write before the effect."
            )
        if crash is not None:
            where = "after" if crash.when == "after" else "before"
            return (
                f"A copy died ({crash.describe()}) {'after doing the effect' if where == 'after' else 'part-way'} "
                "but before recording that it was done, so the retry did it again.\n"
                "Record the claim before the effect (a conditional write, or Powertools' @idempotent), and pass an\n"
                "idempotency key to the downstream so that it does the effect once per key even when you call it twice."
            )
        check = self.apart_check
        if self.together and check is not None and check.once:
            return (
                "Copies that arrive at the same time each checked 'not done yet' before any of them recorded it "
                f"(copies sent one after another did it once: round {check.number}).\n"
                "A check and a write in two calls leave that window open. Make the claim one atomic step: a\n"
                "conditional write (attribute_not_exists) that only one copy can win, or Powertools' @idempotent."
            )
        seen = f" (round {check.number}: {check.said()})" if check is not None else ""
        return (
            "Nothing records that an event was handled: even copies sent one after another each did the effect"
            f"{seen}.\nRecord a claim on the event's key with a conditional write (attribute_not_exists) before the "
            "effect,\nor use Powertools' @idempotent."
        )

    def _lost_hint(self) -> str:
        if self.crash is not None:
            return (
                f"The effect was LOST: {self.crash.describe()}, and no copy did the effect after it. The retry found\n"
                "the event already claimed (a claim recorded before the effect and never released) and skipped it.\n"
                "Let a claim left by a copy that died expire or be released, so that the retry does the work."
            )
        return (
            "The effect was LOST: copies returned, yet count_effect found no effect. Does the handler do it for "
            "this event, and does count_effect count where the handler writes?"
        )


class DuplicateEffectError(AssertionError):
    """The effect of a delivered event was counted other than exactly once."""

    def __init__(self, report: EffectReport):
        super().__init__(report.message())
        self.report = report


class CrashNotReached(AssertionError):
    """A crash was armed, but no copy reached the crash point."""


# Shown as `idemlab.testing.DuplicateEffectError` in pytest's report, where users import it.
DuplicateEffectError.__module__ = CrashNotReached.__module__ = "idemlab.testing"
