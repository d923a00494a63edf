"""The LocalStack path cannot run here (no Docker engine); everything about it that can be
checked without one is checked: the compose file and the GitHub workflow."""

from __future__ import annotations

import re
import shlex

import yaml

from idemlab import settings
from idemlab.backends.localstack_common import interpolate  # the one reader of docker-compose.yml's ${NAME:-default}

COMPOSE = settings.ROOT / "docker-compose.yml"
WORKFLOW = settings.ROOT / ".github" / "workflows" / "localstack.yml"
PINNED_IMAGE = "localstack/localstack:4.14.0"  # last release that starts without a token


def localstack_service() -> dict:
    return yaml.safe_load(COMPOSE.read_text())["services"]["localstack"]


def test_image_is_pinned_to_the_last_token_free_release_and_overridable():
    image = localstack_service()["image"]
    assert interpolate(image, {}) == PINNED_IMAGE
    assert (
        interpolate(image, {"LOCALSTACK_IMAGE": "localstack/localstack:2026.3.0"}) == "localstack/localstack:2026.3.0"
    )


def test_token_docker_socket_retry_delay_ttl_and_ports():
    service = localstack_service()
    env = service["environment"]
    assert interpolate(env["LOCALSTACK_AUTH_TOKEN"], {"LOCALSTACK_AUTH_TOKEN": "tok"}) == "tok"
    assert interpolate(env["LOCALSTACK_AUTH_TOKEN"], {}) == ""
    assert 1 <= int(env["LAMBDA_RETRY_BASE_DELAY"]) <= 5
    assert env["DYNAMODB_REMOVE_EXPIRED_ITEMS"] == "1"
    assert "/var/run/docker.sock:/var/run/docker.sock" in service["volumes"]
    assert set(service["ports"]) == {"127.0.0.1:${LAB_PORT:-4566}:4566", "127.0.0.1:4510-4559:4510-4559"}
    assert interpolate(service["ports"][0], {}) == "127.0.0.1:4566:4566"
    assert interpolate(service["ports"][0], {"LAB_PORT": "4576"}) == "127.0.0.1:4576:4566"


def test_stream_records_appear_for_writes_right_after_create_table():
    # LocalStack 4.14.0 delays kinesis-local by KINESIS_LATENCY (500 ms unless set, config.py):
    # records of writes in that first half second are lost, which AWS never does.
    assert localstack_service()["environment"]["KINESIS_LATENCY"] == "0"


def test_functions_run_on_the_hosts_architecture():
    # LocalStack 4.14.0 reads it with config.is_env_true: "1" or "true".
    assert localstack_service()["environment"]["LAMBDA_IGNORE_ARCHITECTURE"] in ("1", "true")


def test_health_check_asks_localstack_itself():
    check = localstack_service()["healthcheck"]
    assert "http://localhost:4566/_localstack/health" in check["test"]
    assert int(check["retries"]) * int(check["interval"].rstrip("s")) >= 60


def test_workflow_runs_the_same_localstack_stage_as_make_test():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert {"push", "pull_request"} <= set(triggers)
    [job] = workflow["jobs"].values()
    uses = [step["uses"].split("@")[0] for step in job["steps"] if "uses" in step]
    assert uses[:3] == ["actions/checkout", "actions/setup-python", "hashicorp/setup-terraform"]
    terraform = next(s for s in job["steps"] if s.get("uses", "").startswith("hashicorp/setup-terraform"))
    assert terraform["with"]["terraform_wrapper"] is False
    runs = [step["run"] for step in job["steps"] if "run" in step]
    assert runs[:2] == ["make install", "make test-localstack"]
    # The stage brings LocalStack up, runs every test marked any_backend (the conformance suite,
    # tests/localstack: deploy, second plan, every notebook; the stack tests that hold
    # anywhere), and brings it down: the same recipe `make test` runs.
    makefile = (settings.ROOT / "Makefile").read_text()
    recipe = makefile.split("\ntest-localstack:", 1)[1].split("\n\n", 1)[0]
    assert "idemlab up" in recipe and "-m any_backend" in recipe and "idemlab down" in recipe


def test_every_make_target_the_workflow_calls_exists():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    [job] = workflow["jobs"].values()
    called = {
        word
        for step in job["steps"]
        if "run" in step
        for line in step["run"].splitlines()
        for i, word in enumerate(shlex.split(line))
        if i > 0 and shlex.split(line)[i - 1] == "make"
    }
    makefile = (settings.ROOT / "Makefile").read_text()
    defined = set(re.findall(r"^([a-z][a-z-]*):", makefile, flags=re.MULTILINE))
    assert called and called <= defined, f"missing make targets: {called - defined}"


def test_the_notebooks_the_workflow_runs_exist():
    assert list((settings.ROOT / "notebooks").glob("*.ipynb"))
