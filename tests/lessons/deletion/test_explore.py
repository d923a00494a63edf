"""The naive deletion worker explored through the take-home plugin (idemlab.testing), in
Lambda worker processes: run twice, it sends the goodbye twice (the workflow's claim and
per-step progress are the lesson's answer)."""

from __future__ import annotations

import pytest

from idemlab import build, module_spec
from idemlab.testing import DuplicateEffectError, Handler

WORKER = "naive_deletion_worker"


@pytest.fixture
def goodbyes(idemlab):
    """The worker's tables and bucket (no faults table: this deployment injects none), and a
    user with data; counts a request's goodbye emails."""
    tables = module_spec.default("tables")
    names = {}
    for key in module_spec.function(WORKER)["tables"]:
        entry = tables[key]
        names[key] = idemlab.make_table(f"explore-{key}", key=entry["hash_key"], sort_key=entry.get("range_key")).name
    variables = module_spec.environment(WORKER, names)
    del variables["FAULTS_TABLE"]
    bucket = "explore-user-files"
    idemlab.client("s3").create_bucket(Bucket=bucket)
    idemlab.environment.update(variables, USER_FILES_BUCKET=bucket)
    dynamodb = idemlab.client("dynamodb")

    def count(event) -> int:
        rows = dynamodb.scan(TableName=names["email_outbox"], ConsistentRead=True)["Items"]
        return sum(1 for row in rows if row["deletion_request_id"]["S"] == event["deletion_request_id"])

    def request(number: int) -> dict:
        user, request_id = f"explored-user-{number}", f"explored-deletion-{number}"
        dynamodb.put_item(TableName=names["user_records"], Item={"user_id": {"S": user}, "record_id": {"S": "r1"}})
        dynamodb.put_item(TableName=names["identities"], Item={"user_id": {"S": user}})
        idemlab.client("s3").put_object(Bucket=bucket, Key=f"{user}/avatar.png", Body=b"x")
        item = {"deletion_request_id": {"S": request_id}, "user_id": {"S": user}, "status": {"S": "SCHEDULED"}}
        dynamodb.put_item(TableName=names["deletion_requests"], Item=item)
        return {"deletion_request_id": request_id}

    return request, count


def test_naive_worker_says_goodbye_again_when_the_request_comes_back(idemlab, goodbyes):
    new_request, count = goodbyes
    code = build.zip_bytes(build.source_files(build.FUNCTIONS_DIR / "deletion"))
    with pytest.raises(DuplicateEffectError) as failure:
        idemlab.explore(Handler.zip(code, f"{WORKER}.handler"), new_request, count)
    report = failure.value.report
    print(report.message())
    assert (report.failure.schedule.id, report.failure.counts) == ("twice", 2)
    steps = [(step["operation"], step.get("TableName", step.get("Bucket"))) for step in report.steps]
    print(steps)
    assert ("PutItem", "explore-email_outbox") in steps and steps[-1] == ("UpdateItem", "explore-deletion_requests")
