"""Lesson 1 plumbing (notebook 01): run the vehicle-registration workflows, count rows, draw the result.

``kind`` is ``"naive"``, ``"idempotent"`` or ``"native"``: the workflow
``vehicle_registration_<kind>`` and its table (``TABLE_KEYS``) in ``stack``, the ``lab`` output
(docs/DESIGN.md). The naive and idempotent workflows write through a Lambda function
(``write_vehicle_<kind>``); the native one writes with Step Functions' own DynamoDB PutItem
task and its condition, no function at all.
"""

from __future__ import annotations

import functools
import json
import uuid
from dataclasses import dataclass
from typing import Any

from boto3.dynamodb.conditions import Attr

from idemlab import clients, faults, lambda_code, lessons, pictures, settings

FUNCTION_DIR = settings.ROOT / "functions" / "vehicles"

# A module of the Lambda code (``"notify"``, ``"registration.vin"``), imported in-process.
import_function_module = functools.partial(lambda_code.load, FUNCTION_DIR)

# A published VIN with a valid check digit (its ninth character, X, stands for 10).
VALID_VIN = "1M8GDM9AXKP042788"
STOLEN_VIN = "1FTFW1E53MFA00001"  # on the RMV check's stolen list, check digit valid
MALFORMED = "MalformedRequestError"

# Each malformed request, and the error the workflow fails with. Nothing may be written.
MALFORMED_REQUESTS: dict[str, tuple[object, str]] = {
    "missing VIN": ({"request_id": "bad-1", "owner": "Ada"}, MALFORMED),
    "VIN is a number": ({"request_id": "bad-2", "vin": 11111111111111111, "owner": "Ada"}, MALFORMED),
    "owner is a list": ({"request_id": "bad-3", "vin": VALID_VIN, "owner": ["Ada"]}, MALFORMED),
    "request_id is null": ({"request_id": None, "vin": VALID_VIN, "owner": "Ada"}, MALFORMED),
    "blank owner": ({"request_id": "bad-5", "vin": VALID_VIN, "owner": "  "}, MALFORMED),
    "misspelt field": ({"request_id": "bad-6", "vin": VALID_VIN, "owner": "Ada", "fault_injektion": {}}, MALFORMED),
    "fault count is a string": (
        {"request_id": "bad-7", "vin": VALID_VIN, "owner": "Ada", "fault_injection": {"notify_failures": "1"}},
        MALFORMED,
    ),
    "request is an array": ([VALID_VIN], MALFORMED),
    "VIN check digit wrong": ({"request_id": "bad-9", "vin": "1M8GDM9A1KP042788", "owner": "Ada"}, "InvalidVinError"),
    "VIN too short": ({"request_id": "bad-10", "vin": "1M8GDM9AXKP04278", "owner": "Ada"}, "InvalidVinError"),
    "VIN with O": ({"request_id": "bad-11", "vin": "1M8GDM9AXKP04278O", "owner": "Ada"}, "InvalidVinError"),
    "stolen vehicle": ({"request_id": "bad-12", "vin": STOLEN_VIN, "owner": "Ada"}, "StolenVehicleError"),
}

TABLE_KEYS = {"naive": "vehicles_naive", "idempotent": "vehicles", "native": "vehicles_native"}
KINDS = tuple(TABLE_KEYS)
POLL_SECONDS = 0.1  # an execution of this workflow takes about 0.1-2 s on a warm backend
WAIT_SECONDS = 60  # covers cold workers on a busy 2-core CI machine, plus the 1 s Retry interval


def new_request(owner: str = "Ada Lovelace", vin: str = VALID_VIN, notify_failures: int = 0) -> dict:
    """A registration request with a fresh request id (the idempotency key)."""
    request: dict = {"request_id": f"req-{uuid.uuid4().hex[:12]}", "vin": vin, "owner": owner}
    if notify_failures:
        request["fault_injection"] = {"notify_failures": notify_failures}
    return request


@dataclass(frozen=True)
class Execution:
    arn: str
    status: str  # SUCCEEDED, FAILED, TIMED_OUT or ABORTED
    output: dict | None = None
    error: str | None = None
    cause: str | None = None

    @property
    def registration_id(self) -> str | None:
        return (self.output or {}).get("registration", {}).get("registration_id")

    @property
    def error_message(self) -> str | None:
        """The failing function's own message, taken out of Lambda's error payload."""
        try:
            return json.loads(self.cause or "")["errorMessage"]
        except (ValueError, KeyError, TypeError):
            return self.cause


def _deployed(stack: dict, kind: str) -> tuple[str, str]:
    """The kind's workflow (its ARN) and table (its name) in ``stack``."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    return stack["state_machines"][f"vehicle_registration_{kind}"], stack["tables"][TABLE_KEYS[kind]]


def start(stack: dict, kind: str, request: object) -> str:
    """Start one asynchronous execution (StartExecution); returns its ARN, never its result.

    AWS refuses DescribeExecution for an Express execution (unless a Map Run started it;
    Step Functions API reference, DescribeExecution), and so do LocalStack and the
    embedded backend: what an asynchronous Express execution did shows in its effects
    (the table, see ``wait_for_rows``) and in CloudWatch Logs, not in an API answer.
    """
    # No name: Step Functions gives each execution a fresh UUID, so the same request sent twice is two executions.
    sfn = clients.client("stepfunctions")
    workflow, _ = _deployed(stack, kind)
    return sfn.start_execution(stateMachineArn=workflow, input=json.dumps(request))["executionArn"]


def run(stack: dict, kind: str, request: object, sfn: Any = None) -> Execution:
    """Run one execution to its end and return its result, the same way on every backend.

    StartSyncExecution returns when the Express execution has ended, with its status and
    output (Step Functions API reference, StartSyncExecution). The duplicates this lesson
    counts come from a second execution of the same request and from the Retry inside
    one; an asynchronous start (``start``) makes them too, but cannot be asked for its result.
    """
    sfn = sfn or clients.client("stepfunctions")
    ended = sfn.start_sync_execution(stateMachineArn=_deployed(stack, kind)[0], input=json.dumps(request))
    output = json.loads(ended["output"]) if ended.get("output") else None
    return Execution(ended["executionArn"], ended["status"], output, ended.get("error"), ended.get("cause"))


def wait_for_rows(stack: dict, kind: str, request_id: str, count: int, timeout: float = WAIT_SECONDS) -> list[dict]:
    """The rows of a request once there are at least ``count`` (an asynchronous execution's effect)."""
    return lessons.poll(
        lambda: rows(stack, kind, request_id),
        timeout,
        POLL_SECONDS,
        until=lambda r: len(r) >= count,
        shown=f"{count} row(s) of request {request_id} written by the {kind} workflow",
    )


def outline(stack: dict, kind: str) -> None:
    """Print the deployed workflow's states, the function each task runs, and its Retry."""
    described = clients.client("stepfunctions").describe_state_machine(stateMachineArn=_deployed(stack, kind)[0])
    print(f"{described['name']} ({described['type']})")

    def states(definition: dict, pad: str) -> None:
        for name, state in definition["States"].items():
            runs = f" runs {state['Resource'].rsplit(':', 1)[-1]}" if "Resource" in state else ""
            print(f"{pad}{name}: {state['Type']}{runs}")
            for retry in state.get("Retry", []):
                errors = ", ".join(retry["ErrorEquals"])
                more = retry.get("MaxAttempts", 3)
                print(f"{pad}    Retry on {errors}: up to {more} more attempts")
            for branch in state.get("Branches", []):
                states(branch, pad + "    ")

    states(json.loads(described["definition"]), "    ")


def rows(stack: dict, kind: str, request_id: str | None = None) -> list[dict]:
    """The registrations in the kind's table, for one request id or all of them."""
    where = {} if request_id is None else {"FilterExpression": Attr("request_id").eq(request_id)}
    return lessons.scan(_deployed(stack, kind)[1], **where)


def notify_attempts(stack: dict, request_id: str) -> int:
    """How often the notify step ran for a request with injected faults (0 if none)."""
    point = import_function_module("registration.faults").NOTIFY
    return faults.reached(lessons.table(stack, "faults"), faults.contract().fault_key(point, request_id))


def show(registrations: list[dict]) -> None:
    """Print registrations as a short table, one line each."""
    for r in sorted(registrations, key=lambda r: r["registered_at"]):
        print(f"{r['registered_at']}  {r['registration_id']}  {r['request_id']}  {r['vin']}  {r['owner']}")
    print(f"({len(registrations)} row{'s' if len(registrations) != 1 else ''})")


def chart(counts: dict[str, dict[str, int]]) -> Any:
    """Grouped bars: rows per logical request, one bar per kind counted, per scenario (``counts[kind][scenario]``)."""
    ax = pictures.axes(None, 6, 3.2)
    kinds = [kind for kind in KINDS if kind in counts]
    width = 0.8 / len(kinds)
    scenarios = list(counts[kinds[0]])
    for n, kind in enumerate(kinds):
        offset = (n - (len(kinds) - 1) / 2) * width
        heights = [counts[kind][scenario] for scenario in scenarios]
        ax.bar_label(ax.bar([i + offset for i in range(len(scenarios))], heights, width, label=kind))
    ax.axhline(1, color="grey", linestyle=":", linewidth=1)
    ax.set_xticks(range(len(scenarios)), scenarios)
    top = max(max(c.values()) for c in counts.values()) + 1
    ax.set(ylabel="rows for one request", ylim=(0, top), title="One logical request, run twice")
    ax.set_yticks(range(top + 1))  # rows come whole
    ax.legend()
    ax.figure.tight_layout()
    return ax.figure
