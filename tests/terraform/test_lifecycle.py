"""The real thing: the Terraform root applied to the embedded backend, used through the
names in its outputs, planned again twice at once (no changes), and destroyed.

Its own prefix (`tfci`), so it coexists with the session's `lab` stack.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.exceptions import ClientError

from idemlab import clients, stack

PREFIX = "tfci"
DESIGN_KEYS = {
    "region",
    "tables",
    "functions",
    "function_arns",
    "state_machines",
    "queues",
    "queue_arns",
    "buckets",
    "schedule_group",
    "scheduler_role_arn",
    "alarms",
}
VALID_VIN = "1M8GDM9AXKP042788"  # check digit X, the textbook example


def test_a_bad_prefix_is_refused_before_anything_runs():
    with pytest.raises(ValueError, match="prefix"):
        stack.deploy(prefix="Bad_Prefix", backend="embedded")
    with pytest.raises(ValueError, match="backend"):
        stack.deploy(prefix="lab", backend="mainframe")


def test_outputs_of_a_stack_never_deployed_say_how_to_deploy(backend):
    with pytest.raises(stack.StackError, match="make deploy"):
        stack.outputs(prefix="nothere")


def test_stacks_of_different_prefixes_regions_or_endpoints_get_their_own_working_copy(backend, monkeypatch):
    first = stack.stack_name("lab", "embedded")
    assert stack.stack_name("tfci", "embedded") != first
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert stack.stack_name("lab", "embedded") != first
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    assert stack.stack_name("lab", "embedded") != first


@pytest.mark.timeout(900)
def test_apply_use_plan_nothing_destroy(backend, capsys):
    started = time.monotonic()
    lab = stack.deploy(prefix=PREFIX)
    applied = time.monotonic() - started
    timings = {"apply_seconds": round(applied, 1)}

    assert set(lab) == DESIGN_KEYS
    assert stack.outputs(PREFIX) == lab
    assert all(name.startswith(f"{PREFIX}-") for name in lab["tables"].values())

    # Every name in the outputs exists on the backend.
    dynamodb, sfn = clients.client("dynamodb"), clients.client("stepfunctions")
    for table in lab["tables"].values():
        assert dynamodb.describe_table(TableName=table)["Table"]["TableStatus"] == "ACTIVE"
    types = {key: sfn.describe_state_machine(stateMachineArn=arn)["type"] for key, arn in lab["state_machines"].items()}
    assert types == {
        "vehicle_registration_naive": "EXPRESS",
        "vehicle_registration_idempotent": "EXPRESS",
        "vehicle_registration_native": "EXPRESS",
        "account_deletion": "STANDARD",
    }

    # A deployed function, found and checked only through the outputs, writes to its table.
    request_id = f"tfci-{uuid.uuid4().hex[:12]}"
    event = {"request_id": request_id, "vin": VALID_VIN, "owner": "Ada Lovelace"}
    reply = clients.client("lambda").invoke(
        FunctionName=lab["functions"]["write_vehicle_idempotent"], Payload=json.dumps(event)
    )
    body = json.loads(reply["Payload"].read())
    assert "FunctionError" not in reply, body
    stored = dynamodb.get_item(
        TableName=lab["tables"]["vehicles"], Key={"request_id": {"S": request_id}}, ConsistentRead=True
    )
    assert stored["Item"]["owner"]["S"] == "Ada Lovelace"

    started = time.monotonic()
    # Two plans at once on the one working copy: its lock runs them one after the other
    # (unlocked, the second fails: tflocal refuses the first one's override file, or
    # Terraform its state lock). With the zips it applied: other people's edits to
    # functions/ meanwhile are not a diff.
    with ThreadPoolExecutor(2) as pool:
        plans = list(pool.map(lambda _: stack.plan(PREFIX, rebuild=False), range(2)))
    assert [empty for empty, _ in plans] == [True, True], [text[-4000:] for _, text in plans]
    timings["two_plans_seconds"] = round(time.monotonic() - started, 1)

    started = time.monotonic()
    stack.destroy(PREFIX)
    timings["destroy_seconds"] = round(time.monotonic() - started, 1)
    with capsys.disabled():
        print(f"\nterraform lifecycle on the embedded backend: {timings}")
    with pytest.raises(ClientError) as gone:
        dynamodb.describe_table(TableName=lab["tables"]["vehicles"])
    assert gone.value.response["Error"]["Code"] == "ResourceNotFoundException"
    with pytest.raises(stack.StackError):
        stack.outputs(PREFIX)
    assert not (stack.WORKING_COPIES / stack.stack_name(PREFIX)).exists()


@pytest.mark.timeout(300)
def test_the_region_the_learner_chose_is_the_region_terraform_plans_for(backend, monkeypatch):
    """AWS_REGION decides where the notebooks' clients look; the stack must be deployed there."""
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    prefix = "tfrg"
    planned = stack._Stack(prefix, "embedded")
    try:
        with stack._locked(planned.name):
            planned.prepare(rebuild=False)
            # The bucket names end in the provider's region; planning them alone is quick.
            _, plan = planned.terraform(
                "plan", "-input=false", "-no-color", "-target=module.lab.aws_s3_bucket.this", *planned.variables
            )
    finally:
        stack.forget(prefix)
    names = sorted(set(re.findall(rf'"({prefix}-(?:user-files|artifacts)-[0-9]+-[a-z0-9-]+)"', plan)))
    assert len(names) == 2 and all(name.endswith("-eu-west-1") for name in names), names or plan[-3000:]


def test_the_cli_config_uses_a_provider_mirror_only_when_one_exists(tmp_path):
    mirrored = stack.cli_config_text(tmp_path / "mirror", plugin_cache=tmp_path / "cache")
    assert "filesystem_mirror {" in mirrored and f'"{tmp_path / "mirror"}"' in mirrored
    assert 'exclude = ["registry.terraform.io/hashicorp/aws"]' in mirrored
    assert f'plugin_cache_dir = "{tmp_path / "cache"}"' in mirrored
    public = stack.cli_config_text(None, plugin_cache=tmp_path / "cache")
    assert "provider_installation" not in public and "plugin_cache_dir" in public
    # With or without a mirror, an init without a lock file uses the cache as it is, rather
    # than installing into it again under Terraforms running from it.
    for text in (mirrored, public):
        assert "plugin_cache_may_break_dependency_lock_file = true" in text


def test_a_mirror_named_in_the_environment_must_hold_the_provider(tmp_path, monkeypatch):
    monkeypatch.setenv("TF_PROVIDER_MIRROR", str(tmp_path))
    with pytest.raises(stack.StackError, match=r"holds no registry.terraform.io/hashicorp/aws"):
        stack.provider_mirror()
    (tmp_path / "registry.terraform.io" / "hashicorp" / "aws").mkdir(parents=True)
    assert stack.provider_mirror() == tmp_path


def test_an_aws_deploy_never_inherits_a_local_endpoint(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4566")
    assert "AWS_ENDPOINT_URL" not in stack.terraform_env("aws")
    assert stack.terraform_env("embedded")["AWS_ENDPOINT_URL"] == "http://127.0.0.1:4566"
    assert stack.terraform_env("embedded")["S3_HOSTNAME"] == "127.0.0.1"
