"""The capstone's checker (idemlab/exercises/capstone.py) against refund handlers, on the
take-home plugin's embedded backend: it must catch each attack on the notebook's starting
point, with its count, pass the answer key, and tell apart handlers that fail one attack only.
"""

from __future__ import annotations

import importlib
import json
import textwrap

import pytest

from idemlab import settings
from idemlab.exercises import capstone
from idemlab.testing import Handler

STARTING_POINT = settings.ROOT / "notebooks" / "capstone_refund.py"
FEW = capstone.Rounds(concurrent=2, crash=1, late_redrive=1, mismatch=1, sent_twice=1, email_outage=1)

# Keys passed downstream to both providers, and no record of its own: the providers forget
# a key after a day, so only a redrive days later gets through.
KEYS_DOWNSTREAM_ONLY = """
import json

import providers


def handler(event, context):
    for record in event["Records"]:
        request = json.loads(record["body"])
        key = request["refund_id"]
        providers.refund(request["payment_id"], request["amount"], request["currency"], idempotency_key=f"r-{key}")
        providers.send_email(request["email"], "Your refund", "Refunded.", idempotency_key=f"e-{key}")
"""

# One Powertools record around both effects (the answer key before the email-outage attack):
# it holds every other attack, but each failed email deletes the only record of the refund.
ONE_RECORD_FOR_BOTH = """
import json
import os

import providers
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)

persistence = DynamoDBPersistenceLayer(table_name=os.environ["IDEMPOTENCY_TABLE"])
config = IdempotencyConfig(
    event_key_jmespath="refund_id",
    payload_validation_jmespath="[payment_id, amount, currency, email]",
    expires_after_seconds=14 * 24 * 60 * 60,
    raise_on_no_idempotency_key=True,
)


@idempotent_function(data_keyword_argument="request", persistence_store=persistence, config=config)
def issue_refund(request: dict) -> dict:
    key = request["refund_id"]
    refunded = providers.refund(
        request["payment_id"], request["amount"], request["currency"], idempotency_key=f"refund-{key}"
    )
    providers.send_email(request["email"], "Your refund", "Refunded.", idempotency_key=f"refund-email-{key}")
    return {"refund_id": key, "refund_ref": refunded["refund_ref"]}


def handler(event, context):
    config.register_lambda_context(context)
    failures = []
    for record in event["Records"]:
        try:
            issue_refund(request=json.loads(record["body"]))
        except Exception:
            failures.append({"itemIdentifier": record["messageId"]})
    return {"batchItemFailures": failures}
"""


def counts(report, attack):
    return report.attack(attack).counts


def test_the_starting_point_loses_every_attack_and_each_is_counted(idemlab):
    report = capstone.attack(idemlab, capstone.refund_handler(STARTING_POINT), FEW)
    assert not report.passed
    doubled = {"refund": 2, "email": 2}
    assert counts(report, "concurrent duplicates") == [doubled, doubled]
    assert counts(report, "crash after the effect") == [doubled]
    assert counts(report, "late redrive") == [doubled]
    assert counts(report, "payload mismatch") == [doubled]
    assert counts(report, "sent twice by the producer") == [doubled]
    # A refund at each of the three receives the mail provider refused, and one at the redrive.
    assert counts(report, "email keeps failing") == [{"refund": 4, "email": 1}]
    problems = report.attack("payload mismatch").problems
    assert any("not refused" in problem for problem in problems), problems
    assert any("changed amount was refunded" in problem for problem in problems), problems
    assert "wrote no record" in report.attack("late redrive").notes[0]
    text = str(report)
    assert "0 of 6" in text and "2 times in 2 of 2 rounds  WRONG" in text


def test_the_answer_key_holds_every_attack(idemlab):
    report = capstone.attack(idemlab, capstone.refund_handler(capstone.ANSWER))
    assert report.passed, str(report)
    assert all(round_counts == {"refund": 1, "email": 1} for a in report.attacks for round_counts in a.counts)
    assert "every attack held (6 of 6)" in str(report)


def test_keys_passed_downstream_without_a_record_lose_only_the_redrives_after_a_day(idemlab, tmp_path):
    source = tmp_path / "keys_only.py"
    source.write_text(KEYS_DOWNSTREAM_ONLY)
    report = capstone.attack(idemlab, capstone.refund_handler(source), FEW)
    held = {attack.name: attack.held for attack in report.attacks}
    assert held == {
        "concurrent duplicates": True,
        "crash after the effect": True,
        "late redrive": False,
        "payload mismatch": True,
        "sent twice by the producer": True,
        "email keeps failing": False,
    }, str(report)
    assert counts(report, "late redrive") == [{"refund": 2, "email": 2}]
    assert counts(report, "email keeps failing") == [{"refund": 2, "email": 1}]


def test_one_record_around_both_effects_refunds_again_when_the_email_keeps_failing(idemlab, tmp_path):
    source = tmp_path / "one_record.py"
    source.write_text(ONE_RECORD_FOR_BOTH)
    report = capstone.attack(idemlab, capstone.refund_handler(source), FEW)
    outage = report.attack("email keeps failing")
    # The refund at the first receive, replayed by the provider's key at the next two, and
    # done again at the redrive on day 5: no record left, the provider's key forgotten.
    assert not outage.held and outage.counts == [{"refund": 2, "email": 1}], str(report)
    assert all(a.held for a in report.attacks if a is not outage), str(report)


def test_a_handler_keyed_on_the_message_id_loses_when_the_producer_sends_twice(idemlab, tmp_path):
    # The answer key, keyed on the SQS message id instead of the refund id, downstream too.
    source = tmp_path / "by_message_id.py"
    answer = capstone.ANSWER.read_text()
    for old, new in (
        ('event_key_jmespath="refund_id"', 'event_key_jmespath="messageId"'),
        (
            'issue_refund(request=json.loads(record["body"]))',
            'issue_refund(request={**json.loads(record["body"]), "messageId": record["messageId"]})',
        ),
        ('key = request["refund_id"]', 'key = request["messageId"]'),
    ):
        assert old in answer, old
        answer = answer.replace(old, new)
    source.write_text(answer)
    report = capstone.attack(idemlab, capstone.refund_handler(source), FEW)
    held = {attack.name: attack.held for attack in report.attacks}
    assert held == {
        "concurrent duplicates": True,
        "crash after the effect": True,
        # A redrive is a new message with a new message id (sqs-configure-dead-letter-queue-redrive).
        "late redrive": False,
        "payload mismatch": False,
        "sent twice by the producer": False,
        "email keeps failing": False,
    }, str(report)
    assert counts(report, "sent twice by the producer") == [{"refund": 2, "email": 2}]


def test_a_record_that_expires_before_the_redrive_horizon_loses_the_late_redrive(idemlab, tmp_path):
    # The answer key with Powertools' default record lifetime (one hour) instead of the horizon.
    source = tmp_path / "one_hour.py"
    answer = capstone.ANSWER.read_text()
    assert "    expires_after_seconds=REDRIVE_HORIZON_SECONDS,\n" in answer
    source.write_text(answer.replace("    expires_after_seconds=REDRIVE_HORIZON_SECONDS,\n", ""))
    report = capstone.attack(idemlab, capstone.refund_handler(source), FEW)
    late = report.attack("late redrive")
    assert not late.held and late.counts == [{"refund": 2, "email": 2}], str(report)
    assert "lived 3600 s" in late.notes[0] or "lived 3601 s" in late.notes[0], late.notes
    # The refund's record, gone after an hour, no longer covers the redrive on day 5 either.
    outage = report.attack("email keeps failing")
    assert not outage.held and outage.counts == [{"refund": 2, "email": 1}], str(report)
    assert all(a.held for a in report.attacks if a not in (late, outage)), str(report)


def test_deliver_answers_an_sqs_shaped_event_with_the_handlers_own_answer(idemlab, tmp_path):
    # The plugin's bootstrap answers an SQS event unwrapped (as Lambda's poller reads it);
    # deliver must hand that answer back, not fail looking for its timing report.
    (tmp_path / "sqs_echo.py").write_text(
        textwrap.dedent(
            """
            def handler(event, context):
                return {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in event["Records"]]}
            """
        )
    )
    event = capstone.sqs_event(capstone.refund_request(0))
    delivery = idemlab.deliver(Handler.module("sqs_echo.handler", code_root=tmp_path), event, copies=2)
    message_id = event["Records"][0]["messageId"]
    assert delivery.results == [{"batchItemFailures": [{"itemIdentifier": message_id}]}] * 2


def test_a_provider_refuses_a_key_reused_for_another_request_and_writes_nothing(idemlab, monkeypatch):
    names = {
        "REFUND_LEDGER_TABLE": idemlab.make_table("capstone-test-ledger", key="entry_id"),
        "MAIL_LOG_TABLE": idemlab.make_table("capstone-test-mail", key="message_id"),
        "PROVIDER_KEYS_TABLE": idemlab.make_table("capstone-test-keys", key="idempotency_key", ttl="expiration"),
    }
    for variable, table in names.items():
        monkeypatch.setenv(variable, table.name)
    # Loaded now, while boto3 points at the plugin's backend.
    providers = importlib.reload(importlib.import_module("idemlab.exercises.capstone_providers"))
    first = providers.refund("pay-1", 1500, "EUR", idempotency_key="k1")
    again = providers.refund("pay-1", 1500, "EUR", idempotency_key="k1")
    assert again == {**first, "replayed": True}
    with pytest.raises(providers.KeyReusedError, match="k1"):
        providers.refund("pay-1", 2500, "EUR", idempotency_key="k1")
    with pytest.raises(ValueError, match="positive whole number"):
        providers.refund("pay-1", -5, "EUR", idempotency_key="k2")
    ledger = names["REFUND_LEDGER_TABLE"].scan(ConsistentRead=True)["Items"]
    assert [(row["payment_id"], int(row["amount"])) for row in ledger] == [("pay-1", 1500)]
    stored = names["PROVIDER_KEYS_TABLE"].scan(ConsistentRead=True)["Items"]
    assert [row["idempotency_key"] for row in stored] == ["payments#k1"]
    assert json.loads(stored[0]["request"])["amount"] == 1500


def test_the_handler_file_must_exist_and_not_shadow_the_providers(tmp_path):
    with pytest.raises(FileNotFoundError, match="no Python file"):
        capstone.refund_handler(tmp_path / "missing.py")
    (tmp_path / "providers.py").write_text("def handler(event, context): pass\n")
    with pytest.raises(ValueError, match=r"providers\.py"):
        capstone.refund_handler(tmp_path / "providers.py")
