"""Where a checkout can be made to fail, and how: the names a caller arms in the faults table.

See ``charging.faults`` for what each one does.
"""

AFTER_CHARGE = "after_charge"  # the card is charged, the result not yet recorded

TIME_OUT = "time_out"  # the invocation runs past its function timeout: nothing is recorded
LOSE_ANSWER = "lose_answer"  # the processor charged, and its answer never arrived
FAULTS = (TIME_OUT, LOSE_ANSWER)


def fault_key(point: str, idempotency_key: str) -> str:
    return f"{point}#{idempotency_key}"
