"""The caller's side of the Lambda code's fault hooks: arming a fault, reading how often its
point was reached, taking it away.

The contract itself (the item's shape, the kinds, ``fault_key``) is the Lambda code's
(``functions/shared/faults.py``), bundled into every zip; this module reads it from there
(``lambda_code.load``), so it ships in no zip and writes nothing the functions do not read.
Each lesson names its own points (``erasure.faults.POINTS``, ``charging.faults.AFTER_CHARGE``,
``registration.faults.NOTIFY``) and arms through here.
"""

from __future__ import annotations

from idemlab import build, lambda_code


def contract():
    """``shared.faults`` of the Lambda code: ``fault_key``, ``item``, the kinds (``CRASH``, ...)."""
    return lambda_code.load(build.SHARED_DIR, "shared.faults")


def arm(table, point: str, key: str, kind: str, times: int = 1) -> str:
    """Make the next ``times`` arrivals at ``point`` for ``key`` fail the ``kind`` way.

    Parameters
    ----------
    table
        The stack's ``faults`` table (a boto3 Table).
    point, key
        Where and for which request (order, deletion) the fault strikes.
    kind
        What happens there: one of ``contract().KINDS``.
    times
        How many arrivals fail; later ones go on.

    Returns
    -------
    str
        The item's key, for ``disarm`` and ``reached``.

    Raises
    ------
    ValueError
        For a kind or a count that is not one; nothing is armed then.
    """
    item = contract().item(point, key, kind, times)
    table.put_item(Item=item)
    return item[contract().FAULT_KEY]


def reached(table, fault_key: str) -> int:
    """How many arrivals the fault at ``fault_key`` has counted (0 when none is armed)."""
    faults = contract()
    item = table.get_item(Key={faults.FAULT_KEY: fault_key}, ConsistentRead=True).get("Item")
    return int(item[faults.REACHED]) if item else 0


def disarm(table, fault_key: str) -> None:
    """Take an armed fault away: the cause of the failures is fixed."""
    table.delete_item(Key={contract().FAULT_KEY: fault_key})
