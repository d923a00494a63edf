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
    usage = {"lambda_concurrency": 0, "iam_roles": 5, "schedule_groups": 1, "schedules": 0, "alarms": 2}
    account = account_needs.Account(usage, {**dict.fromkeys(account_needs.QUOTAS), "lambda_concurrency": 1000})
    lines = account_needs.quota_check("embedded", resources, 30, account)
    text = "\n".join(lines)
    assert "Service Quotas is AWS-only" in text
    assert "IAM roles: 26 x 30 = 780, in use 5  [iam L-FE177D64]" in text
    assert "Lambda concurrent executions (the lessons' peak): 12 x 30 = 360, in use 0, quota 1000" in text
    assert "Scheduler schedule groups: 1 x 30 = 30, in use 1  [scheduler L-A632CD40]" in text
    assert "CloudWatch metric alarms: 12 x 30 = 360, in use 2" in text


def test_the_quota_check_counts_what_the_account_already_uses():
    """Issue 37, item 4: 30 x 12 fits a quota of 400 only while no other function reserves
    concurrency; with 50 reserved elsewhere (in use), the check stops the workshop."""
    account = account_needs.Account(
        {"lambda_concurrency": 50, "iam_roles": 0, "schedule_groups": 0, "schedules": 0, "alarms": 0},
        {**dict.fromkeys(account_needs.QUOTAS), "lambda_concurrency": 400},
    )
    with pytest.raises(account_needs.QuotasTooLow, match="needs 360, 50 are in use, the account's quota is 400"):
        account_needs.quota_check("aws", {}, 30, account)
    account.usage["lambda_concurrency"] = 40
    assert account_needs.quota_check("aws", {}, 30, account)


def test_the_concurrency_per_participant_is_the_highest_lesson_peak_read_from_the_code():
    """Issue 37, item 4: not a constant 18. Notebook 02 races RACE_COPIES checkouts, each with
    its card processor call, plus the headroom; notebook 07 fewer."""
    from idemlab.exercises import keys
    from idemlab.lessons import checkout

    peaks = account_needs.lesson_peaks()
    assert peaks["02_checkout"] == checkout.RACE_COPIES * checkout.EXECUTIONS_PER_COPY + checkout.CONCURRENCY_HEADROOM
    assert peaks["07_keys"] == max(keys.COPIES_TOGETHER, keys.HANDLER_COPIES) * 2 + checkout.CONCURRENCY_HEADROOM
    assert account_needs.concurrency_per_participant() == max(peaks.values()) == 12
    # Notebook 02 races exactly RACE_COPIES where the account allows it.
    assert (
        "checkout.copies_that_fit(checkout.RACE_COPIES, limit)"
        in (settings.ROOT / "notebooks" / "02_checkout.ipynb").read_text()
    )


def test_the_idle_cost_counts_every_alarm_at_the_standard_price():
    lines = account_needs.idle_cost({"aws_cloudwatch_metric_alarm": 12, "aws_lambda_event_source_mapping": 4})
    alarms = next(line for line in lines if line.item.startswith("CloudWatch metric alarms"))
    assert alarms.count == 12 and alarms.usd_per_month_each == 0.10
    assert alarms.usd_per_hour == pytest.approx(12 * 0.10 / 730)
    pollers = next(line for line in lines if "event source mappings" in line.item)
    assert pollers.count == pytest.approx(4 * 15 * 730 * 60 / 1e6)


def test_the_idle_cost_counts_the_sweepers_own_runs():
    """Issue 37, item 8: each sweep is also a duration, a PutMetricData call, a trace and a KMS
    request on aws/dynamodb; the idle cost left them out."""
    lines = {line.item: line for line in account_needs.idle_cost({"aws_cloudwatch_metric_alarm": 12})}
    runs = 730 * 60 / 5
    assert lines["Lambda duration of the sweeper's runs"].count == pytest.approx(runs * 0.25)
    assert lines["CloudWatch PutMetricData of the sweeper (one a run)"].count == pytest.approx(runs / 1e3)
    assert lines["X-Ray traces of the sweeper (active tracing, one a run)"].count == pytest.approx(runs / 1e6)
    assert lines["KMS requests on aws/dynamodb (the sweeper's reads)"].count == pytest.approx(runs / 1e4)
