"""What a delivery did, copy by copy, and the failure message a learner reads.

Times are wall-clock seconds (time.time()) taken in the test process (sent, answered)
and in the worker (handler started, ended): one machine, one clock.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from idemlab.testing.handlers import Crash

# Rounds listed by number, and timelines drawn, in a failure message: enough to see
# the pattern, short enough to read.
LISTED_ROUNDS = 20
DRAWN_TIMELINES = 2
SHOWN_VALUE_CHARACTERS = 70
# What a failure message advises, by how the copies were sent.
ADVICE = {
    "crash": (
        "A copy died after doing the effect but before recording that it was done, so the retry did it again.\n"
        "Record the claim before the effect (a conditional write, or Powertools' @idempotent), and pass an\n"
        "idempotency key to the downstream so that it does the effect once per key even when you call it twice."
    ),
    "together": (
        "Copies that arrive at the same time each checked 'not done yet' before any of them recorded it.\n"
        "A check and a write in two calls leave that window open. Make the claim one atomic step: a\n"
        "conditional write (attribute_not_exists) that only one copy can win, or Powertools' @idempotent."
    ),
    "apart": "Even copies sent one after another repeated the effect: nothing recorded that the event was already "
    "handled.",
}


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
    error: dict | None = None  # Lambda's error payload: errorType, errorMessage

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def error_type(self) -> str | None:
        return self.error.get("errorType") if self.error else None

    def outcome(self, crash: Crash | None) -> str:
        if self.ok:
            return "returned " + _short(self.result)
        if crash is not None and self.error_type == crash.error_type:
            return f"CRASHED: {crash.describe()} ({self.error_type})"
        return f"failed: {self.error_type}: {_short(self.error.get('errorMessage', ''))}"


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

    def timeline(self) -> list[str]:
        origin = min(copy.sent for copy in self.copies)

        def ms(moment: float) -> str:
            return f"{(moment - origin) * 1000:+.0f}"

        lines = ["  copy  pid      sent (ms)  handler ran (ms)   answered (ms)  outcome"]
        for c in self.copies:
            ran = f"{ms(c.started)} .. {ms(c.ended)}" if c.started is not None else "-"
            times = f"{ms(c.sent):>9}  {ran:<17}  {ms(c.answered):>13}"
            lines.append(f"  {c.number:<4}  {c.pid or '-':<7}  {times}  {c.outcome(self.crash)}")
        ran = [c for c in self.copies if c.started is not None]
        if len(ran) >= 2 and max(c.started for c in ran) < min(c.ended for c in ran):
            lines.append("  The handler ran in several copies at the same time (their 'handler ran' times overlap).")
        return lines


@dataclass
class Round:
    number: int
    event: object
    delivery: Delivery
    count: int  # the effect, counted after the round


@dataclass
class EffectReport:
    """Rounds of `copies` copies each, and the effect counted after each round (once is right)."""

    handler: str
    copies: int
    together: bool
    crash: Crash | None
    rounds: list[Round] = field(default_factory=list)

    @property
    def bad_rounds(self) -> list[Round]:
        return [r for r in self.rounds if r.count != 1]

    def doubled(self) -> list[int]:
        """Numbers of the rounds where the effect happened more than once."""
        return [r.number for r in self.rounds if r.count > 1]

    def message(self) -> str:
        more, less = len(self.doubled()), sum(r.count < 1 for r in self.rounds)
        what = " and ".join(f"happened {word} than once in {n} of {len(self.rounds)} rounds"
                            for word, n in (("MORE", more), ("LESS", less)) if n)
        how = f"{self.copies} copies of each event sent {'together' if self.together else 'one after another'}"
        how += f", and {self.crash.describe()}" if self.crash else ""
        lines = [f"{self.handler}: the effect was not exactly once. It {what} ({how}).", ""]
        lines.append("Effect counted after each round:")
        for count in sorted({r.count for r in self.rounds}):
            numbers = [r.number for r in self.rounds if r.count == count]
            listed = ", ".join(map(str, numbers[:LISTED_ROUNDS])) + (", ..." if len(numbers) > LISTED_ROUNDS else "")
            mark, rounds = "ok" if count == 1 else "WRONG", len(numbers)
            lines.append(f"  {count} time{'s' if count != 1 else ''}: {rounds:>4} rounds  {mark}  (rounds {listed})")
        for r in self.bad_rounds[:DRAWN_TIMELINES]:
            lines += ["", f"Round {r.number}, event {_short(r.event)}: effect counted {r.count} times. Timeline:"]
            lines += r.delivery.timeline()
        return "\n".join([*lines, "", ADVICE["crash" if self.crash else "together" if self.together else "apart"]])


class DuplicateEffectError(AssertionError):
    """The effect of a delivered event was counted other than exactly once."""

    def __init__(self, report: EffectReport):
        super().__init__(report.message())
        self.report = report


class CrashNotReached(AssertionError):
    """A crash was armed, but no copy reached the crash point."""


# Shown as `idemlab.testing.DuplicateEffectError` in pytest's report, where users import it.
DuplicateEffectError.__module__ = CrashNotReached.__module__ = "idemlab.testing"
