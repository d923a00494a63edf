"""A workshop on one embedded server: three participants' stacks side by side, one lesson run
per participant at the same time, then `make workshop-destroy`'s teardown and its proof.

The commands are the ones the Makefile runs (`python -m idemlab.workshop up 3` and `down`),
in a child process with this session's environment (its embedded backend, BACKEND=embedded).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from idemlab import account_needs, clients, lessons, settings, stack, workshop
from idemlab.embedded.server import EmbeddedBackend
from idemlab.lessons import keys, vehicles

# Three deploys two at a time, then three destroys (1-2 minutes each on a 2-core machine).
pytestmark = pytest.mark.timeout(1800)

PARTICIPANTS = ["p01", "p02", "p03"]
TAG = "idemlab:participant"
DOCS = settings.ROOT / "docs" / "aws.md"


def workshop_command(*args: str) -> subprocess.CompletedProcess:
    ran = subprocess.run(
        [sys.executable, "-m", "idemlab.workshop", *args],
        env=dict(os.environ),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=1500,
    )
    print(ran.stdout)
    return ran


def lesson_run(name: str, lab: dict) -> dict[str, list[str]]:
    """The vehicles lesson for one participant: each kind, one request whose notify step fails
    once (the write runs twice); the request ids it sent, by kind. Every id carries the name."""
    sent: dict[str, list[str]] = {}
    for kind in vehicles.KINDS:
        request = vehicles.new_request(owner=f"owner of {name}", notify_failures=1)
        request["request_id"] = f"{name}-{uuid.uuid4().hex[:10]}"
        execution = vehicles.run(lab, kind, request)
        assert execution.status == "SUCCEEDED", (name, kind, execution)
        sent.setdefault(kind, []).append(request["request_id"])
    return sent


def names_in(lab: dict) -> list[str]:
    """Every name the stack's outputs give, queue URLs and ARNs reduced to their names."""
    found = []
    for kind in ("tables", "functions", "state_machines", "queues", "buckets", "alarms"):
        for value in (lab.get(kind) or {}).values():
            found.append(re.split(r"[/:]", value)[-1])
    found.append(lab["schedule_group"])
    found.append(lab["scheduler_role_arn"].rsplit("/", 1)[-1])
    return found


@pytest.fixture
def own_backend(backend, monkeypatch):
    """A fresh embedded backend for this test alone: the teardown's proof lists every service
    whole, and the session's backend holds what other tests keep there (the conformance
    suite's session fixtures), which would count as leftovers."""
    server = EmbeddedBackend().start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", server.url)
    monkeypatch.setenv("LAB_PORT", str(server.port))
    yield server.url
    server.stop()


def test_three_participants_share_nothing_and_the_teardown_leaves_nothing(own_backend):
    started = workshop_command("up", str(len(PARTICIPANTS)), "--parallel", str(len(PARTICIPANTS)), "--yes")
    assert started.returncode == 0, started.stdout[-3000:]
    assert "Service Quotas is AWS-only" in started.stdout
    assert re.search(r"per participant: \$[0-9.]+ per hour, \$[0-9.]+ per day", started.stdout), started.stdout
    try:
        labs = {name: stack.outputs(prefix=name) for name in PARTICIPANTS}
        resources = workshop.recorded(settings.backend())["resources"]

        # Every name carries its participant; no two stacks share one.
        seen: dict[str, str] = {}
        for name, lab in labs.items():
            for resource in names_in(lab):
                assert resource.startswith(f"{name}-"), f"{name}'s {resource} does not carry the participant"
                assert resource not in seen, f"{resource} is in {seen.get(resource)}'s stack and {name}'s"
                seen[resource] = name

        # Tagged with the participant, and a metric namespace of its own.
        lambda_, dynamodb, sqs = clients.client("lambda"), clients.client("dynamodb"), clients.client("sqs")
        cloudwatch = clients.client("cloudwatch")
        for name, lab in labs.items():
            for arn in lab["function_arns"].values():
                assert lambda_.list_tags(Resource=arn)["Tags"].get(TAG) == name, arn
            for table in lab["tables"].values():
                arn = dynamodb.describe_table(TableName=table)["Table"]["TableArn"]
                tags = {t["Key"]: t["Value"] for t in dynamodb.list_tags_of_resource(ResourceArn=arn)["Tags"]}
                assert tags.get(TAG) == name, table
            for url in lab["queues"].values():
                assert sqs.list_queue_tags(QueueUrl=url).get("Tags", {}).get(TAG) == name, url
            alarm = cloudwatch.describe_alarms(AlarmNames=[lab["alarms"]["stuck_processing"]])["MetricAlarms"][0]
            assert alarm["Namespace"] == f"IdempotencyLab/{name}"

        # One lesson run per participant, all at once.
        with ThreadPoolExecutor(max_workers=len(labs)) as pool:
            sent = dict(zip(labs, pool.map(lambda item: lesson_run(*item), labs.items()), strict=True))

        for name, lab in labs.items():
            others = [other for other in labs if other != name]
            # Each run reached its own stack: its rows are there (two naive, one idempotent).
            for kind, expected in (("naive", 2), ("idempotent", 1)):
                for request_id in sent[name][kind]:
                    assert len(vehicles.rows(lab, kind, request_id)) == expected, (name, kind)
            # ... and nothing of another participant's run is in any table of this stack,
            for table in lab["tables"].values():
                for item in lessons.scan(table):
                    text = json.dumps(item, default=str)
                    touched = [other for other in others if f"{other}-" in text]
                    assert not touched, f"{name}'s table {table} holds {touched}'s item: {text[:300]}"
            # ... nor any message in any of its queues (the vehicles lesson sends none).
            for url in lab["queues"].values():
                attributes = sqs.get_queue_attributes(
                    QueueUrl=url,
                    AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
                )["Attributes"]
                assert set(attributes.values()) == {"0"}, f"{name}'s queue {url}: {attributes}"

        # A notebook 07 variant, made at run time beside p01's stack: tagged like its template,
        # and the teardown removes it (Terraform does not know it).
        variant = keys.KeyedCheckouts(labs["p01"]).deploy_handler("probe", keys.checkout_zip(), keys.HANDLER)
        variant_arn = lambda_.get_function_configuration(FunctionName=variant)["FunctionArn"]
        assert lambda_.list_tags(Resource=variant_arn)["Tags"].get(TAG) == "p01"

        # docs/aws.md states the figures the code gives.
        assert_docs_match(resources, labs["p01"])
    finally:
        ended = workshop_command("down", "--parallel", "2")
    assert ended.returncode == 0, ended.stdout[-3000:]
    counts = re.findall(r"^  (.+?) +(\d+)(?::.*)?$", ended.stdout.split("left, per service", 1)[1], flags=re.MULTILINE)
    assert len(counts) == 13, ended.stdout
    assert all(count == "0" for _, count in counts), counts
    for name in PARTICIPANTS:
        with pytest.raises(stack.StackError):
            stack.outputs(prefix=name)


def assert_docs_counts(resources: dict[str, int], text: str) -> None:
    """docs/aws.md states the planned resources (in all and by type) and the idle cost the code prints."""
    total = sum(resources.values())
    assert f"{total} resources" in text, f"docs/aws.md does not say the stack is {total} resources"
    for kind, count in resources.items():
        assert f"| `{kind}` | {count} |" in text, f"docs/aws.md: no row `{kind}` | {count}"
    cost = "\n".join(account_needs.cost_lines(resources, 1)[:-2])
    assert cost in text, f"docs/aws.md's idle cost block is not what the code prints:\n{cost}"


def assert_docs_match(resources: dict[str, int], lab: dict) -> None:
    text = DOCS.read_text()
    assert_docs_counts(resources, text)
    sqs = clients.client("sqs")
    retention = {
        key: int(
            sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["MessageRetentionPeriod"])["Attributes"][
                "MessageRetentionPeriod"
            ]
        )
        for key, url in lab["queues"].items()
    }
    work = {seconds for key, seconds in retention.items() if not key.endswith("_dlq")}
    dead = {seconds for key, seconds in retention.items() if key.endswith("_dlq")}
    assert work == {4 * 86400} and dead == {14 * 86400}, retention
    assert "work queues keep messages 4 days, dead-letter queues 14" in text
