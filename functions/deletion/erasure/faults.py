"""Where a deletion can be made to fail: the step boundaries, named for the shared fault contract.

Every step (and the sweeper's ``sweep`` and ``restart``) has three boundaries; a fault
armed at ``<step>.<boundary>`` for a deletion request strikes the next workers that reach
it (``shared.faults``: ``fault_key``, the one item shape, ``strike``). A test or a notebook
arms one through the harness (``idemlab.lessons.deletion.Deletions.arm_fault``).
"""

from __future__ import annotations

from erasure.errors import InjectedFaultError
from shared import faults
from shared.faults import CRASH, ERROR, KINDS, PAUSE, TIMEOUT, fault_key

__all__ = [
    "AFTER_EFFECT",
    "AFTER_PROGRESS",
    "BEFORE",
    "CRASH",
    "ERROR",
    "KINDS",
    "PAUSE",
    "POINTS",
    "TIMEOUT",
    "InjectedFaultError",
    "at",
    "fault_key",
    "strike",
]

BEFORE = "before"  # nothing of the step has happened yet
AFTER_EFFECT = "after_effect"  # the effect happened; its progress is not recorded
AFTER_PROGRESS = "after_progress"  # the progress is recorded; the reply is not sent
POINTS = (BEFORE, AFTER_EFFECT, AFTER_PROGRESS)


def at(step: str, boundary: str) -> str:
    """The fault point of a step's boundary: ``at("delete_files", BEFORE)`` is ``delete_files.before``."""
    return f"{step}.{boundary}"


def strike(point: str, deletion_request_id: str, context) -> None:
    """``shared.faults.strike``, its injected error named as the deletion's own
    (``erasure.errors.InjectedFaultError``, a DeletionError the workflow retries like any other)."""
    try:
        faults.strike(point, deletion_request_id, context)
    except faults.InjectedFaultError as exc:
        raise InjectedFaultError(str(exc)) from exc
