"""Where and how a delivered copy crashes, without touching the handler's code.

`Crash.after("shop.payments.charge", how="exit")` makes the first copy that returns
from `shop.payments.charge` die right there: the work the function did is done, and
nothing after it runs. That is the moment an at-least-once system retries.

- how="exit": the worker process exits at once (an out-of-memory kill or a crashed host);
  Lambda answers Runtime.ExitError.
- how="timeout": the copy sleeps until the function's timeout stops it; Lambda answers
  Sandbox.Timedout. This is the crash every backend can show: LocalStack 4.14 does not
  report a process that exits (its test_lambda_handler_exit, in
  tests/aws/services/lambda_/test_lambda.py, is skipped as not yet supported), a timeout it does.
"""

from __future__ import annotations

from dataclasses import dataclass

HOWS = ("exit", "timeout")
WHENS = ("before", "after")
# What the backend answers for a copy that died each way.
ERROR_TYPES = {"exit": "Runtime.ExitError", "timeout": "Sandbox.Timedout"}


class CrashError(ValueError):
    """A crash point that cannot be armed as given."""


@dataclass(frozen=True)
class Crash:
    """A crash point: `when` (before/after) `target` is called, `times` copies die `how`."""

    target: str
    when: str = "after"
    how: str = "exit"
    times: int = 1

    def __post_init__(self):
        if self.when not in WHENS:
            raise CrashError(f"when must be one of {WHENS}, not {self.when!r}")
        if self.how not in HOWS:
            raise CrashError(f"how must be one of {HOWS}, not {self.how!r}")
        if not isinstance(self.target, str) or "." not in self.target:
            raise CrashError(f"target must be a dotted name such as 'shop.payments.charge', not {self.target!r}")
        if not isinstance(self.times, int) or self.times < 1:
            raise CrashError(f"times must be a whole number of copies, at least 1, not {self.times!r}")

    @classmethod
    def after(cls, target: str, how: str = "exit", times: int = 1) -> "Crash":
        """Die right after `target` returns (its effect happened, nothing after it did)."""
        return cls(target, "after", how, times)

    @classmethod
    def before(cls, target: str, how: str = "exit", times: int = 1) -> "Crash":
        """Die right before `target` is called."""
        return cls(target, "before", how, times)

    @property
    def error_type(self) -> str:
        return ERROR_TYPES[self.how]

    def describe(self) -> str:
        death = "exits" if self.how == "exit" else "times out"
        return f"the copy {death} {self.when} {self.target}"
