"""Where a checkout can be made to fail, and how: the names a caller arms in the faults table.

See ``charging.faults`` for what each one does.
"""

AFTER_CHARGE = "after_charge"  # the card is charged, the result not yet recorded

TIME_OUT = "time_out"  # the invocation runs past its function timeout: nothing is recorded
LOSE_ANSWER = "lose_answer"  # the processor charged, and its answer never arrived
FAULTS = (TIME_OUT, LOSE_ANSWER)


def fault_key(point: str, idempotency_key: str) -> str:
    return f"{point}#{idempotency_key}"


def armed(point: str, idempotency_key: str, fault: str, times: int = 1) -> dict:
    """The faults-table item (low-level client form) that makes the next ``times``
    invocations reaching ``point`` for this key fail the ``fault`` way."""
    if point != AFTER_CHARGE:
        raise ValueError(f"unknown fault point {point!r}; use {AFTER_CHARGE}")
    if fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}; use one of {', '.join(FAULTS)}")
    if isinstance(times, bool) or not isinstance(times, int) or times < 1:
        raise ValueError(f"times must be a whole number of at least 1, got {times!r}")
    return {
        "fault_key": {"S": fault_key(point, idempotency_key)},
        "remaining": {"N": str(times)},
        "fault": {"S": fault},
    }
