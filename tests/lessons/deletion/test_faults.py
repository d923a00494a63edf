"""An injected crash inside Lambda never lets the step go on, however late the runtime
stops the invocation. It used to sleep past the function's timeout and then return: on a
loaded machine the runtime's stop came more than the one second late, the "crashed"
claim step woke up and claimed as a worker of its own, and the workflow's retry found the
request held by it (the fault matrix's `claim.before` cells ended SUCCEEDED with the
request left PROCESSING)."""

from __future__ import annotations

import threading

from idemlab.lessons import deletion

faults = deletion.import_function_module("erasure.faults")
contract = deletion.import_function_module("shared.faults")  # the deletion zip's copy, which strike uses
OVERRUN_SECONDS = 1  # how far past the deadline the hook used to sleep before returning


class PastItsDeadline:
    """A Lambda context whose time is up (what a late stop looks like to the handler)."""

    def get_remaining_time_in_millis(self) -> int:
        return 0


def test_a_crash_inside_lambda_does_not_return_when_the_stop_comes_late(monkeypatch):
    monkeypatch.setattr(contract, "_take", lambda key: faults.CRASH)
    returned = threading.Event()

    def crash_here():
        faults.strike(faults.at("claim", faults.BEFORE), "request-1", PastItsDeadline())
        returned.set()

    threading.Thread(target=crash_here, daemon=True).start()
    # Nothing to wait for but the absence of a return: three times the old overrun.
    assert not returned.wait(3 * OVERRUN_SECONDS), "the crashed step went on past its deadline"
