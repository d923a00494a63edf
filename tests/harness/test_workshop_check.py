"""Issue 37, items 3 and 5: the workshop's check changes nothing, `up` deploys only once
confirmed, and the teardown leaves no backup of a workshop table behind."""

from __future__ import annotations

import uuid

import pytest

from idemlab import clients, workshop
from idemlab.embedded.server import EmbeddedBackend
from support.lab_copies import clone, machine_env, run

pytestmark = pytest.mark.timeout(1200)  # two plans of a stack on a loaded 2-core machine


def everything() -> dict[str, list[str]]:
    """Every resource the backend holds, by service, whatever its name."""

    def listed(service: str, operation: str, expression: str, **args) -> list[str]:
        found = clients.client(service).get_paginator(operation).paginate(**args).search(expression)
        return sorted(str(value) for value in found if value is not None)

    return {
        "tables": listed("dynamodb", "list_tables", "TableNames[]"),
        "backups": listed("dynamodb", "list_backups", "BackupSummaries[].BackupArn", BackupType="ALL"),
        "queues": listed("sqs", "list_queues", "QueueUrls[]"),
        "functions": listed("lambda", "list_functions", "Functions[].FunctionName"),
        "mappings": listed("lambda", "list_event_source_mappings", "EventSourceMappings[].UUID"),
        "roles": listed("iam", "list_roles", "Roles[].RoleName"),
        "schedule groups": listed("scheduler", "list_schedule_groups", "ScheduleGroups[].Name"),
        "schedules": listed("scheduler", "list_schedules", "Schedules[].Name"),
        "alarms": listed("cloudwatch", "describe_alarms", "MetricAlarms[].AlarmName"),
        "log groups": listed("logs", "describe_log_groups", "logGroups[].logGroupName"),
        "buckets": sorted(bucket["Name"] for bucket in clients.client("s3").list_buckets().get("Buckets", [])),
        "state machines": listed("stepfunctions", "list_state_machines", "stateMachines[].name"),
        "rules": listed("events", "list_rules", "Rules[].Name"),
    }


@pytest.fixture
def own_backend(monkeypatch):
    """A backend of this test's own: the snapshot lists every service whole."""
    server = EmbeddedBackend().start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", server.url)
    monkeypatch.setenv("BACKEND", "embedded")
    yield server
    server.stop()


def test_the_check_prints_quotas_usage_and_cost_and_creates_nothing_and_up_waits_for_a_yes(tmp_path, own_backend):
    lab = clone(tmp_path / "instructor")
    env = machine_env(lab, BACKEND="embedded", LAB_PORT=str(own_backend.port))
    before = everything()
    checked = run(lab, env, "-m", "idemlab.workshop", "check", "p01,p02")
    assert checked.returncode == 0
    text = checked.stdout
    assert "IAM roles: 27 x 2 = 54, in use 0" in text
    assert "Lambda concurrent executions (the lessons' peak): 12 x 2 = 24, in use 0, quota 40" in text
    assert "idle cost of one participant's stack" in text and "X-Ray traces of the sweeper" in text
    assert everything() == before
    assert not list((lab / ".lab").glob("workshop-*.json"))  # no workshop recorded: nothing to tear down

    # `up` prints the same check, then deploys only on a typed "yes": with no one to answer
    # (stdin closed), it stops and has created nothing.
    unconfirmed = run(lab, env, "-m", "idemlab.workshop", "up", "p01,p02")
    assert unconfirmed.returncode == 1 and "not confirmed: nothing was deployed" in unconfirmed.stdout
    assert "in use 0" in unconfirmed.stdout
    assert everything() == before
    assert not list((lab / ".lab").glob("workshop-*.json"))


def test_a_confirmation_is_a_typed_yes():
    answers = iter(["yes\n", "y", ""])
    assert [workshop.confirmed(2, "aws", lambda _: next(answers)) for _ in range(3)] == [True, False, False]

    def no_terminal(_):
        raise EOFError

    assert workshop.confirmed(2, "aws", no_terminal) is False


def test_the_teardown_turns_recovery_off_and_removes_every_backup_of_a_workshop_table(backend):
    """Deleting a table with point-in-time recovery on leaves a SYSTEM backup for 35 days
    (DynamoDB API reference, BackupDetails), which the embedded backend does not make: here a
    backup of our own stands for it, listed, named and deleted by the same calls."""
    name = f"w{uuid.uuid4().hex[:6]}"
    table = f"{name}-email-outbox"
    dynamodb = clients.client("dynamodb")
    dynamodb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "idempotency_key", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "idempotency_key", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.update_continuous_backups(
        TableName=table, PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True}
    )
    dynamodb.create_backup(TableName=table, BackupName="holds-an-erased-address")
    try:
        assert workshop.leftovers([name])["DynamoDB backups"] == [f"{table}/holds-an-erased-address"]
        assert workshop.disable_point_in_time_recovery([table, f"{name}-gone"]) == [table]
        described = dynamodb.describe_continuous_backups(TableName=table)["ContinuousBackupsDescription"]
        assert described["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"] == "DISABLED"
        assert workshop.remove_table_backups([name]) == [f"deleted the USER backup holds-an-erased-address of {table}"]
        assert workshop.leftovers([name])["DynamoDB backups"] == []
    finally:
        dynamodb.delete_table(TableName=table)
