"""The lab's own checkouts, explored through the take-home plugin: every crash point and
every interleaving of two copies, in Lambda worker processes, with no widened race window
(check_act_delay_ms stays 0: the schedule, not the timing, makes the race)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from idemlab import build, module_spec
from idemlab.lessons import checkout as checkout_lesson
from idemlab.module_spec import table_keys
from idemlab.testing import DuplicateEffectError, Handler
from support.checkout_in_process import environment

CODE = Path(__file__).resolve().parents[2] / "functions" / "checkout"
# A copy waits at its point while the other runs, and a timeout crash waits this out: long
# enough for a cold start with Powertools on a loaded machine.
TIMEOUT_SECONDS = 6


@pytest.fixture
def ledger(idemlab):
    """The checkout's tables, and the card processor deployed as its own function."""
    keys = table_keys("card_processor", *checkout_lesson.FUNCTION_KEYS)
    names = {key: idemlab.make_table(f"explore-{key}", key=hash_key).name for key, hash_key in keys.items()}
    card_processor = f"explore-card-processor-{uuid.uuid4().hex[:8]}"
    idemlab.client("lambda").create_function(
        FunctionName=card_processor,
        Runtime="python3.12",
        Role=idemlab.backend.role_arn,
        Handler="card_processor.handler",
        Code={"ZipFile": build.zip_bytes(build.source_files(CODE))},
        Timeout=int(module_spec.function("card_processor")["timeout"]),
        Environment={"Variables": module_spec.environment("card_processor", names)},
    )
    idemlab.environment.update(environment(names, card_processor))
    return checkout_lesson.Ledger(names["ledger"], idemlab.client("dynamodb"))


def checkout(strategy: str) -> Handler:
    """The handler in the zip the lab deploys: its folder and the ``shared`` package beside it."""
    return Handler.zip(build.zip_bytes(build.source_files(CODE)), f"checkout_{strategy}.handler")


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
