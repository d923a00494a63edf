"""The deletion's malformed-input battery (issue 24): every input below is refused with
InvalidDeletionInputError and changes nothing: no request row, no schedule, no record, file or
identity of the user gone, the stored request exactly as it was.

Counted explicitly (test_the_battery_is_as_large_as_the_issue_asks): at least 33
malformed inputs to request_deletion, cancel_deletion and the claim, and at least 6 to
the workflow's steps after the claim.
"""

from __future__ import annotations

import json
import uuid

import pytest

from idemlab import clients
from idemlab.lessons import deletion
from idemlab.lessons.deletion import Deletions
from support import invocation
from support.deletion_scenario import private_scenario

pytestmark = pytest.mark.any_backend  # the LocalStack stage runs this file too

errors = deletion.import_function_module("erasure.errors")
state = deletion.import_function_module("erasure.state")
claims = deletion.import_function_module("erasure.claims")
request_deletion = deletion.import_function_module("request_deletion")

REQUEST = [
    ["user_id", "ok"],
    "ok",
    {},
    {"user_id": None},
    {"user_id": 42},
    {"user_id": ""},
    {"user_id": "has space"},
    {"user_id": "x" * 41},
    {"user_id": "u1\n"},
    {"user_id": "a/b"},
    {"user_id": "ok", "idempotency_key": "k\n"},
    {"user_id": "ok", "idempotency_key": 7},
    {"user_id": "ok", "delay_seconds": -1},
    {"user_id": "ok", "delay_seconds": "30"},
    {"user_id": "ok", "delay_seconds": 1.5},
    {"user_id": "ok", "delay_seconds": True},
    {"user_id": "ok", "delay_seconds": 10**12},
]
# "<request>" and "<user>" stand for a real SCHEDULED request and its user.
CANCEL = [
    "<request>",
    {},
    {"deletion_request_id": "<request>"},
    {"user_id": "<user>"},
    {"deletion_request_id": "del 1", "user_id": "<user>"},
    {"deletion_request_id": ["<request>"], "user_id": "<user>"},
    {"deletion_request_id": "<request>", "user_id": None},
    {"deletion_request_id": "<request>", "user_id": ""},
    {"deletion_request_id": "<request>", "user_id": "mallory"},  # someone else's request
    {"deletion_request_id": "<request>", "user_id": "<user>\n"},
]
CLAIM = [
    "<request>",
    {"input": {"deletion_request_id": "<request>"}},
    {"owner": "o" * 81, "input": {"deletion_request_id": "<request>"}},
    {"owner": "exec 1", "input": {"deletion_request_id": "<request>"}},
    {"owner": "exec-1", "input": {"deletion_request_id": "<request>", "redrive": "yes"}},
    {"owner": "exec-1", "input": "<request>"},
    {"owner": "exec-1", "input": {"deletion_request_id": None}},
]
# The claim a step is handed, broken one field at a time ("<token>" is the real token).
STEP = [
    "<request>",
    {"owner": "exec-1", "fencing_token": "<token>"},
    {"deletion_request_id": "<request>", "fencing_token": "<token>"},
    {"deletion_request_id": "<request>", "owner": "exec-1"},
    {"deletion_request_id": "<request>", "owner": "exec-1", "fencing_token": "1"},
    {"deletion_request_id": "<request>", "owner": "exec-1", "fencing_token": True},
    {"deletion_request_id": "<request>", "owner": "exec-1", "fencing_token": 0},
    {"deletion_request_id": ["<request>"], "owner": "exec-1", "fencing_token": "<token>"},
    {"deletion_request_id": "<request>", "owner": None, "fencing_token": "<token>"},
    {
        "deletion_request_id": "<request>",
        "owner": "exec-1",
        "fencing_token": "<token>",
        "steps_done": ["delete_records", "drop_table"],
    },
    {"deletion_request_id": "<request>", "owner": "exec-1", "fencing_token": "<token>", "attempts": 1.5},
]
STEP_FUNCTIONS = (*state.STEPS, "complete_deletion")


def test_the_battery_is_as_large_as_the_issue_asks():
    assert len(REQUEST) + len(CANCEL) + len(CLAIM) >= 33
    assert len(STEP) >= 6


@pytest.fixture(scope="module")
def deletions(stack) -> Deletions:
    return Deletions(private_scenario(stack))


@pytest.fixture
def env(deletions, monkeypatch):
    for name, value in deletions.stack["environment"].items():
        monkeypatch.setenv(name, value)


def fill(event, request_id: str, user_id: str, token: int = 0):
    text = json.dumps(event).replace("<request>", request_id).replace("<user>", user_id)
    return json.loads(text.replace('"<token>"', str(token)))


def snapshot(deletions, user_id: str) -> dict:
    """Everything a deletion input could change: which requests and schedules exist, every
    stored field of the user's own requests, and what is left of the user."""
    schedules = clients.client("scheduler").list_schedules(GroupName=deletions.stack["schedule_group"])["Schedules"]
    items = deletions.table("deletion_requests").scan(ConsistentRead=True)["Items"]
    return {
        "request ids": {item["deletion_request_id"] for item in items},
        "schedules": {s["Name"] for s in schedules},
        "the user's requests": sorted(
            json.dumps(item, default=str, sort_keys=True) for item in items if item.get("user_id") == user_id
        ),
        "left of the user": deletions.leftovers(user_id),
    }


def waiting_request(deletions) -> tuple[str, str]:
    """A request due now, with no schedule: nothing but the test itself acts on it (a firer
    running beside the suite, as on LocalStack after `make up`, would fire a real schedule)."""
    user_id = f"u{uuid.uuid4().hex[:10]}"
    deletions.seed_user(user_id)
    return deletion.new_request_item(deletions.stack, user_id, due_at=0), user_id


def refused(deletions, user_id: str, call) -> None:
    """``call`` is refused and writes nothing: no request or schedule appears, the user's
    requests and data stay as they were. (Other tests' requests may move on meanwhile, by a
    firer or a sweeper running beside the suite: only additions are looked for there.)"""
    before = snapshot(deletions, user_id)
    with pytest.raises(errors.InvalidDeletionInputError):
        call()
    after = snapshot(deletions, user_id)
    assert after["request ids"] - before["request ids"] == set()
    assert after["schedules"] - before["schedules"] == set()
    assert after["the user's requests"] == before["the user's requests"]
    assert after["left of the user"] == before["left of the user"]


@pytest.mark.parametrize("event", REQUEST, ids=[f"request-{n}" for n in range(len(REQUEST))])
def test_a_malformed_request_changes_nothing(deletions, env, event):
    refused(deletions, "ok", lambda: request_deletion.handler(event, None))


@pytest.mark.parametrize("event", CANCEL, ids=[f"cancel-{n}" for n in range(len(CANCEL))])
def test_a_malformed_cancel_changes_nothing(deletions, env, event):
    request_id, user_id = waiting_request(deletions)
    cancel = deletion.import_function_module("cancel_deletion").handler
    refused(deletions, user_id, lambda: cancel(fill(event, request_id, user_id), None))


@pytest.mark.parametrize("event", CLAIM, ids=[f"claim-{n}" for n in range(len(CLAIM))])
def test_a_malformed_claim_changes_nothing(deletions, env, event):
    request_id, user_id = waiting_request(deletions)
    claim = deletion.import_function_module("claim_deletion").handler
    refused(deletions, user_id, lambda: claim(fill(event, request_id, user_id), None))


@pytest.mark.parametrize("event", STEP, ids=[f"step-{n}" for n in range(len(STEP))])
def test_a_step_handed_a_malformed_claim_changes_nothing(deletions, env, event):
    request_id, user_id = waiting_request(deletions)
    won = claims.claim(deletions.table("deletion_requests"), request_id, "exec-1", 60).claim
    handed = fill(event, request_id, user_id, won.fencing_token)
    for function in STEP_FUNCTIONS:
        handler = deletion.import_function_module(function).handler
        refused(deletions, user_id, lambda: invocation.invoke(handler, handed, timeout_seconds=30))
