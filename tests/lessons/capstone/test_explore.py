"""The capstone's refund handlers explored through the take-home plugin: every crash point and
every interleaving of two copies of one message, the providers' two calls named as effects
(each one step: the provider's own writes are not points where the handler can stop)."""

from __future__ import annotations

import pytest

from idemlab import settings
from idemlab.exercises import capstone
from idemlab.testing import DuplicateEffectError

STARTING_POINT = settings.ROOT / "notebooks" / "capstone_refund.py"


@pytest.fixture
def refunds(idemlab):
    """Counts a refund request's effects, each provider's rows."""
    effects = capstone.tables(idemlab)
    return lambda event: effects.count(capstone.request_of(event))


def explore(idemlab, path, refunds):
    handler = capstone.refund_handler(path)
    return idemlab.explore(
        handler, capstone.new_event, refunds, effects=capstone.EXPLORED_EFFECTS, timeout=capstone.CRASH_TIMEOUT_SECONDS
    )


def test_starting_point_refunds_and_emails_again_when_the_message_comes_back(idemlab, refunds):
    with pytest.raises(DuplicateEffectError) as failure:
        explore(idemlab, STARTING_POINT, refunds)
    report = failure.value.report
    print(report.message())
    assert (report.failure.schedule.id, report.failure.counts) == ("twice", {"refund": 2, "email": 2})
    assert [step["operation"] for step in report.steps] == list(capstone.EXPLORED_EFFECTS)


def test_answer_key_holds_in_every_schedule(idemlab, refunds):
    report = explore(idemlab, capstone.ANSWER, refunds)
    print(report.message())
    assert report.passed and len(report.runs) == report.planned
    assert any(run.schedule.together for run in report.runs) and any(run.schedule.crash for run in report.runs)
