"""The lab's own checkouts, explored through the take-home plugin: every crash point and
every interleaving of two copies, in Lambda worker processes, with no widened race window
(check_act_delay_ms stays 0: the schedule, not the timing, makes the race)."""

from __future__ import annotations

import pytest

from idemlab.lessons import checkout as checkout_lesson
from idemlab.testing import DuplicateEffectError
from support.checkout_plugin import checkout, deploy_ledger

# A timeout crash waits this out. A copy must reach its crash point within it (a cold start
# is not counted: its init has a deadline of its own), so it is not the shortest one could be.
TIMEOUT_SECONDS = 6


@pytest.fixture
def ledger(idemlab):
    return deploy_ledger(idemlab, "explore")


def order(number: int, **options) -> dict:
    return checkout_lesson.order(f"explore-{number}", **options)


def test_handrolled_checkout_fails_with_its_smallest_schedule_named(idemlab, ledger):
    with pytest.raises(DuplicateEffectError) as failure:
        idemlab.explore(
            checkout("handrolled"), order, lambda o: ledger.count(o["idempotency_key"]), timeout=TIMEOUT_SECONDS
        )
    report = failure.value.report
    print(report.message())
    print([(run.schedule.id, run.counts, round(run.seconds, 2)) for run in report.runs])
    assert report.verdict == "DUPLICATE"
    assert f"schedule={report.failure.schedule.id!r}" in str(failure.value)


def test_powertools_checkout_with_the_key_downstream_passes_every_schedule(idemlab, ledger):
    report = idemlab.explore(
        checkout("powertools"),
        lambda n: order(n, pass_key_downstream=True),
        lambda o: ledger.count(o["idempotency_key"]),
        timeout=TIMEOUT_SECONDS,
    )
    print(report.message())
    print([(run.schedule.id, run.counts, round(run.seconds, 2)) for run in report.runs])
    assert report.passed
