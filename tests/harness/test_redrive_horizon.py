"""Issue 36, item 1: one redrive horizon, read from its one owner, everywhere.

The horizon is owned by ``idemlab/horizon.py``. Lessons 06, 07 and 08, the keys exercise,
the capstone checker and its answer key, the glossary and lesson 06's queue consumer must
all state (or outlive) that same horizon, and teach the same model: counted from the first
send, and a redrive is a new message with a new ``messageId``.
"""

from __future__ import annotations

import ast
import json

import pytest

from idemlab import horizon, lambda_code, settings
from idemlab.exercises import capstone
from idemlab.exercises import keys as keys_exercise
from idemlab.lessons import keys as keys_lesson

DAYS = f"{horizon.REDRIVE_HORIZON_DAYS} days"
# Phrases of the old, wrong model: the retries before the DLQ added to its retention.
WRONG = ("15 days", "a day of retries plus 14", "1 day of retries + 14")
TAUGHT_IN = ("notebooks/06_queues.ipynb", "notebooks/07_keys.ipynb", "notebooks/08_capstone.ipynb", "docs/glossary.md")


def text_of(relative: str) -> str:
    path = settings.ROOT / relative
    if path.suffix != ".ipynb":
        return path.read_text()
    cells = json.loads(path.read_text())["cells"]
    return "\n".join("".join(cell["source"]) for cell in cells)


def test_the_horizon_is_sqs_maximum_retention_counted_from_the_first_send():
    assert horizon.SQS_MAX_RETENTION_SECONDS == 1_209_600  # SetQueueAttributes, MessageRetentionPeriod
    assert horizon.REDRIVE_HORIZON_SECONDS == horizon.SQS_MAX_RETENTION_SECONDS
    assert horizon.REDRIVE_HORIZON_DAYS == 14


def test_the_keys_lesson_and_exercise_read_the_horizon_from_its_owner():
    assert keys_lesson.REDRIVE_HORIZON_SECONDS == horizon.REDRIVE_HORIZON_SECONDS
    assert keys_exercise.HORIZON_SECONDS == horizon.REDRIVE_HORIZON_SECONDS
    assert keys_exercise.key_and_lifetime()["expires_after_seconds"] >= horizon.REDRIVE_HORIZON_SECONDS
    assert DAYS in keys_exercise.HINT


def test_the_capstone_checker_and_its_answer_key_use_the_same_horizon():
    assert capstone.REDRIVE_HORIZON_SECONDS == horizon.REDRIVE_HORIZON_SECONDS
    # The answer key runs in Lambda and cannot import the lab: read its constant as written.
    tree = ast.parse(capstone.ANSWER.read_text())
    (value,) = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["REDRIVE_HORIZON_SECONDS"]
    ]
    assert eval(compile(ast.Expression(value), "answer", "eval")) == horizon.REDRIVE_HORIZON_SECONDS


def test_the_queue_consumer_keeps_its_records_for_three_horizons_and_a_day(monkeypatch):
    monkeypatch.setenv("ORDER_IDEMPOTENCY_TABLE", "not-used-by-this-check")
    monkeypatch.setenv("AWS_DEFAULT_REGION", settings.region())  # the consumer builds its client at import
    consumer = lambda_code.load(settings.ROOT / "functions" / "queues", "fulfil_idempotent")
    assert consumer.SQS_MAX_RETENTION_SECONDS == horizon.SQS_MAX_RETENTION_SECONDS
    assert consumer.config.expires_after_seconds == 3 * horizon.REDRIVE_HORIZON_SECONDS + horizon.DAY


@pytest.mark.parametrize("relative", TAUGHT_IN)
def test_every_lesson_states_the_one_horizon_and_that_a_redrive_is_a_new_message(relative):
    text = text_of(relative)
    assert DAYS in text
    assert "new `messageId`" in text, f"{relative} does not say a redrive gets a new messageId"
    assert not [phrase for phrase in WRONG if phrase in text], f"{relative} still adds the retries to the horizon"
