"""Who a stack belongs to: PARTICIPANT, what `make deploy` remembered, and the workshop's names.

No backend needed: these are the names the harness derives before Terraform or any client runs.
"""

from __future__ import annotations

import pytest

from idemlab import __main__ as cli
from idemlab import account_needs, lab, module_spec, settings, stack, workshop


@pytest.fixture
def remembered(tmp_path, monkeypatch):
    """A PARTICIPANT_FILE of the test's own, and no PARTICIPANT in the environment."""
    path = tmp_path / "participant"
    monkeypatch.setattr(settings, "PARTICIPANT_FILE", path)
    monkeypatch.delenv("PARTICIPANT", raising=False)
    monkeypatch.setenv("BACKEND", "embedded")
    return path


def test_the_participant_comes_from_the_environment_then_the_remembered_file_then_lab(remembered, monkeypatch):
    assert settings.participant() == "lab"
    remembered.write_text("bob\n")
    assert settings.participant() == "bob"
    monkeypatch.setenv("PARTICIPANT", "alice")
    assert settings.participant() == "alice"
    # Every stack function without a prefix means the participant's stack.
    assert stack.stack_name() == stack.stack_name("alice")
    assert stack.stack_name().startswith("alice-embedded-")


def test_a_bad_participant_is_refused_with_the_rule_and_nothing_is_remembered(remembered, monkeypatch):
    monkeypatch.setenv("PARTICIPANT", "Alice_1")
    with pytest.raises(ValueError, match="PARTICIPANT 'Alice_1' must be 1-20 characters"):
        settings.participant()
    with pytest.raises(ValueError, match="must be 1-20 characters"):
        settings.remember_participant("alice-")
    assert not remembered.exists()
    assert cli.main(["deploy", "--prefix", "bad_name"]) == 1
    assert not remembered.exists()


def test_connect_looks_for_the_participants_stack_without_an_edited_cell(remembered, monkeypatch):
    monkeypatch.setenv("PARTICIPANT", "carol")
    with pytest.raises(stack.StackError, match="no 'carol' stack on embedded"):
        lab.connect()


def test_the_prefix_rule_has_one_copy_the_modules_validation():
    # The pattern is taken from the parsed call; the plain reading of the same rule holds it.
    (rule,) = module_spec.variable("prefix")["validation"]
    assert f'regex("{module_spec.prefix_pattern().pattern}", var.prefix)' in rule["condition"]
    assert stack.PREFIX_PATTERN is module_spec.prefix_pattern()


def test_workshop_participants_from_a_number_or_a_list():
    assert workshop.participants("3") == ["p01", "p02", "p03"]
    assert workshop.participants("alice, bob carol") == ["alice", "bob", "carol"]


@pytest.mark.parametrize(
    "spec, message",
    [
        ("", "PARTICIPANTS is empty"),
        ("0", "1 to 99"),
        ("100", "1 to 99"),
        ("alice alice", "named more than once: alice"),
        ("alice alice-b", "'alice-b' starts with 'alice' plus '-'"),
        ("alice Bob", "participant 'Bob' must be"),
    ],
)
def test_bad_workshop_participants_are_refused(spec, message):
    with pytest.raises((workshop.WorkshopError, ValueError), match=message):
        workshop.participants(spec)


def test_the_workshop_command_refuses_bad_participants_before_anything_runs(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(settings, "STATE_DIR", tmp_path)
    assert workshop.main(["up", "alice alice"]) == 1
    assert "named more than once" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # no workshop recorded, no working copy


def test_the_quota_check_on_an_emulator_counts_and_says_the_lookup_is_aws_only():
    resources = {"aws_iam_role": 26, "aws_scheduler_schedule_group": 1, "aws_cloudwatch_metric_alarm": 12}
    lines = account_needs.quota_check("embedded", resources, 30)
    text = "\n".join(lines)
    assert "the lookup of each quota is AWS-only" in text
    assert "IAM roles: 26 x 30 = 780  [iam L-FE177D64]" in text
    assert "Lambda concurrent executions" in text and "[lambda L-B99A9384]" in text
    assert "Scheduler schedule groups: 1 x 30 = 30  [scheduler L-A632CD40]" in text
    assert "CloudWatch metric alarms: 12 x 30 = 360" in text


def test_the_idle_cost_counts_every_alarm_at_the_standard_price():
    lines = account_needs.idle_cost({"aws_cloudwatch_metric_alarm": 12, "aws_lambda_event_source_mapping": 4})
    alarms = next(line for line in lines if line.item.startswith("CloudWatch metric alarms"))
    assert alarms.count == 12 and alarms.usd_per_month_each == 0.10
    assert alarms.usd_per_hour == pytest.approx(12 * 0.10 / 730)
    pollers = next(line for line in lines if "event source mappings" in line.item)
    assert pollers.count == pytest.approx(4 * 15 * 730 * 60 / 1e6)
