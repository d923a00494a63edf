"""The acceptance matrix of lesson 3 over the deployed stack on the embedded backend:
every fault point x {1, 2, 3 deliveries} x {sequential, concurrent}.

Each cell is its own user and request; the cells run side by side. Every request must
end COMPLETED with every record, file and identity of its user gone, nothing of a
bystander touched, and exactly one goodbye email. The naive worker, run through the
same faults and deliveries, fails visibly.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from idemlab import clients
from idemlab.barrier import all_at_once
from idemlab.lessons import deletion
from idemlab.lessons.deletion import Deletions
from support.deletion_scenario import sweep_in_process

faults = deletion.import_function_module("erasure.faults")

pytestmark = [pytest.mark.stack, pytest.mark.timeout(900)]

# Every boundary at which a worker can die. delete_records has no after_effect: its
# effect and its progress commit in one transaction. claim and complete are themselves
# the progress write, so they have no separate effect either.
STEPS = deletion.import_function_module("erasure.state").STEPS
CLAIM = deletion.import_function_module("claim_deletion").STEP
RECORDS = deletion.import_function_module("delete_records").STEP
COMPLETE = deletion.import_function_module("complete_deletion").STEP
FAULT_POINTS = [
    (CLAIM, faults.BEFORE),
    (CLAIM, faults.AFTER_PROGRESS),
    *[(step, point) for step in STEPS for point in faults.POINTS if (step, point) != (RECORDS, faults.AFTER_EFFECT)],
    (COMPLETE, faults.BEFORE),
    (COMPLETE, faults.AFTER_PROGRESS),
]
DELIVERIES = (1, 2, 3)
MODES = ("sequential", "concurrent")
PARALLEL_CELLS = 12  # cells in flight: each waits out a timeout asleep; 12 x 3 executions stay under the 40 invocations the embedded Lambda allows at once
# The naive cells run their steps rather than sleep (an error, not a crash): fewer at once,
# so a loaded runner's two cores are not split twelve ways under each invocation's timeout.
NAIVE_CELLS_IN_FLIGHT = 6
GONE = {"records": 0, "files": 0, "identities": 0}
SEEDED = {"records": 3, "files": 2, "identities": 1}


@pytest.fixture(scope="module")
def deletions(stack) -> Deletions:
    return Deletions(stack)


def new_request(deletions, due_at: int | None = None) -> tuple[str, str]:
    """A user and a request for their deletion, due now unless told: the deliveries below
    stand in for the schedule, which fires at the due time (a claim refuses a request
    before it, so a request due later would never run). Not due long ago: the stack's own
    sweeper restarts a request still unclaimed a grace period after its due time, and
    during a crash before the claim its restart claimed first (see
    test_a_sweep_during_a_crash_before_the_claim_leaves_a_request_due_now_alone)."""
    user_id = f"u{uuid.uuid4().hex[:10]}"
    deletions.seed_user(user_id)
    due_at = int(time.time()) if due_at is None else due_at
    request_id = deletion.new_request_item(deletions.stack, user_id, due_at=due_at)
    return user_id, request_id


def new_naive_request(deletions) -> tuple[str, str]:
    """A request for the naive worker, due tomorrow: the naive worker reads no due time, and
    the sweeper, which restarts a request left unclaimed past its due time, leaves it alone.
    Due now, a sweep during a test's wait completed it through the workflow (CI, 2026-12-05:
    the crashed naive worker's request was COMPLETED, not SCHEDULED)."""
    return new_request(deletions, due_at=int(time.time()) + 24 * 3600)


def deliver(deletions, request_id: str, deliveries: int, mode: str) -> list[dict]:
    """Start the workflow ``deliveries`` times, one after another or all at once."""
    execution_names = [request_id] + [f"{request_id}-dup{n}" for n in range(2, deliveries + 1)]
    if mode == "sequential":
        return [deletion.wait_for(deletions.start(request_id, name)) for name in execution_names]
    arns = all_at_once([lambda name=name: deletions.start(request_id, name) for name in execution_names])
    return [deletion.wait_for(arn) for arn in arns]


def run_cell(deletions, step, point, deliveries, mode) -> dict:
    user_id, request_id = new_request(deletions)
    deletions.arm_fault(step, point, request_id, faults.CRASH)
    executions = deliver(deletions, request_id, deliveries, mode)
    return {
        "cell": f"{step}.{point} x{deliveries} {mode}",
        "executions": [e["status"] for e in executions],
        "status": deletions.request_status(request_id),
        "leftovers": deletions.leftovers(user_id),
        "goodbyes": deletions.goodbyes(user_id),
    }


def test_every_fault_point_and_delivery_pattern_deletes_once(deletions):
    bystander = f"u{uuid.uuid4().hex[:10]}"
    deletions.seed_user(bystander)
    cells = list(itertools.product(FAULT_POINTS, DELIVERIES, MODES))
    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=PARALLEL_CELLS) as pool:
        results = list(pool.map(lambda c: run_cell(deletions, c[0][0], c[0][1], c[1], c[2]), cells))
    elapsed = time.monotonic() - began
    print(f"\n{len(results)} cells in {elapsed:.0f} s")
    wrong = [r for r in results if (r["status"], r["leftovers"], r["goodbyes"]) != ("COMPLETED", GONE, 1)]
    for r in wrong:
        print(f"WRONG {r}")
    assert wrong == []
    assert deletions.leftovers(bystander) == SEEDED
    # Every delivery ended as an execution that succeeded (the crash is retried inside).
    assert all(set(r["executions"]) == {"SUCCEEDED"} for r in results), [
        r for r in results if set(r["executions"]) != {"SUCCEEDED"}
    ]


def test_a_sweep_during_a_crash_before_the_claim_leaves_a_request_due_now_alone(stack, deletions, monkeypatch):
    """A sweep while a cell's first claim crashes restarts nothing: the request is due now,
    and the sweeper waits a grace period past the due time. A CI run's cells were due at 0:
    the deployed sweeper restarted three claim.before cells during the crash, the restart
    claimed first, the delivery lost the claim and SUCCEEDED, and the request was still
    PROCESSING under the restart when the cell was read."""
    deployed = clients.client("lambda").get_function_configuration(FunctionName=stack["functions"]["sweeper"])
    for name, value in deployed["Environment"]["Variables"].items():
        monkeypatch.setenv(name, value)
    user_id, request_id = new_request(deletions)
    deletions.arm_fault(CLAIM, faults.BEFORE, request_id, faults.CRASH)
    execution = deletions.start(request_id)
    swept = sweep_in_process()
    assert [name for name in swept["restarted"] if name.startswith(request_id)] == []
    assert deletion.wait_for(execution)["status"] == "SUCCEEDED"
    assert [e["name"] for e in deletions.executions_of(request_id)] == [request_id]
    assert deletions.request_status(request_id) == "COMPLETED"
    assert deletions.leftovers(user_id) == GONE


def invoke_naive(stack, request_id: str) -> bool:
    """One delivery to the naive worker, retried once after a crash as Lambda would; True if it ran to the end."""
    payload = json.dumps({"deletion_request_id": request_id}).encode()
    lam = naive_client(stack)
    for _ in range(2):
        if not lam.invoke(FunctionName=stack["functions"]["naive_deletion_worker"], Payload=payload).get(
            "FunctionError"
        ):
            return True
    return False


def naive_client(stack):
    """A crash runs past the naive worker's timeout (as deployed: the suite's stack has a
    shorter one than the lessons'): wait longer than that, and let the SDK retry nothing
    (its retry would be one more delivery)."""
    deployed = clients.client("lambda").get_function_configuration(
        FunctionName=stack["functions"]["naive_deletion_worker"]
    )["Timeout"]
    return clients.client("lambda", read_timeout=deployed + 30, retries={"max_attempts": 1})


NAIVE_POINTS = [(step, point) for step in STEPS for point in (faults.BEFORE, faults.AFTER_EFFECT)]


def run_naive_cell(stack, deletions, step, point, deliveries) -> dict:
    user_id, request_id = new_naive_request(deletions)
    # An error, not a crash: the naive worker catches nothing, so an exception leaves
    # exactly what a crash at the same point leaves, without waiting out its timeout in
    # each of 24 cells (the crash itself is shown by the test below).
    deletions.arm_fault(step, point, request_id, faults.ERROR)
    for _ in range(deliveries):
        invoke_naive(stack, request_id)
    return {
        "cell": f"{step}.{point} x{deliveries}",
        "deliveries": deliveries,
        "status": deletions.request_status(request_id),
        "leftovers": deletions.leftovers(user_id),
        "goodbyes": deletions.goodbyes(user_id),
    }


def test_the_naive_worker_fails_the_same_matrix_visibly(stack, deletions):
    cells = list(itertools.product(NAIVE_POINTS, DELIVERIES))
    with ThreadPoolExecutor(max_workers=NAIVE_CELLS_IN_FLIGHT) as pool:
        results = list(pool.map(lambda c: run_naive_cell(stack, deletions, c[0][0], c[0][1], c[1]), cells))
    wrong = [r for r in results if (r["status"], r["leftovers"], r["goodbyes"]) != ("COMPLETED", GONE, 1)]
    for r in wrong:
        print(f"naive {r['cell']}: {r['goodbyes']} goodbye emails, status {r['status']}, left {r['leftovers']}")
    print(f"naive worker: {len(wrong)} of {len(results)} cells wrong")
    # Every delivery sends another email (a crash after the email one more): nothing tells
    # the naive worker the work is done.
    assert all(r["goodbyes"] >= r["deliveries"] for r in results)
    assert len(wrong) == sum(1 for r in results if r["deliveries"] > 1) + 1
    # A crash after the email and the platform's retry: two emails from one delivery.
    assert next(r for r in results if r["cell"] == "send_goodbye.after_effect x1")["goodbyes"] == 2


def test_the_naive_worker_not_retried_after_a_crash_leaves_the_work_half_done(stack, deletions):
    user_id, request_id = new_naive_request(deletions)
    deletions.arm_fault("delete_files", faults.AFTER_EFFECT, request_id, faults.CRASH)
    payload = json.dumps({"deletion_request_id": request_id}).encode()
    answer = naive_client(stack).invoke(FunctionName=stack["functions"]["naive_deletion_worker"], Payload=payload)
    assert answer.get("FunctionError")
    left = deletions.leftovers(user_id)
    print(f"naive, crashed once, not retried: status {deletions.request_status(request_id)}, left {left}")
    assert deletions.request_status(request_id) == "SCHEDULED"  # nothing says it ever started
    assert left["records"] == 0 and left["files"] == 0 and left["identities"] == 1


def test_a_request_out_of_attempts_fails_to_the_dlq_and_completes_after_redrive(deletions):
    from idemlab.background import redrive

    user_id, request_id = new_request(deletions)
    # Fails every try of every attempt until the cause is "fixed" below.
    key = deletions.arm_fault("send_goodbye", faults.BEFORE, request_id, faults.ERROR, times=1000)
    # Each attempt restarted at once, as the sweeper restarts it once the retry delay passed.
    ends = deletions.run_until_failed(request_id, max_attempts=3)  # MAX_ATTEMPTS in the module's default
    assert ends == ["FAILED -> request RETRYABLE", "FAILED -> request RETRYABLE", "FAILED -> request FAILED"], ends
    assert deletions.leftovers(user_id)["records"] == 0  # steps before the fault stay done
    assert deletions.goodbyes(user_id) == 0
    deletions.disarm_fault(key)
    report = redrive.run_once(deletions.dead_letter_queue)
    assert report.failed == {}
    redriven = [
        arn
        for arn in clients.client("stepfunctions").list_executions(stateMachineArn=deletions.state_machine_arn)[
            "executions"
        ]
        if arn["name"] in {f"redrive-{m}" for m in report.delivered}
    ]
    for execution in redriven:
        deletion.wait_for(execution["executionArn"])
    assert deletions.request_status(request_id) == "COMPLETED"
    assert deletions.leftovers(user_id) == GONE
    assert deletions.goodbyes(user_id) == 1


# Executions that die for good: the claim's own fault points, past the workflow's
# retries (3 tries: ClaimFailed), and a restart that dies the same way before claiming.
# Nothing in the workflow gives these requests back; the sweeper must.
DYING = [
    ("claim", faults.BEFORE, 3),  # dies before the claim write: stays SCHEDULED
    ("claim", faults.AFTER_PROGRESS, 3),  # dies after it: PROCESSING until the lease runs out
    ("claim", faults.BEFORE, 6),  # ... and the sweeper's first restart dies before claiming too
]
SWEEPER_PERIODS = 6  # a bound, so a regression fails instead of looping


@pytest.fixture
def deployed_sweeper_paused(stack):
    """The stack's own sweeper rule disabled for the test, then enabled again. It fires every
    5 minutes; a sweep during the first executions' retries restarted a request due long
    ago, and the restart's claim spent one of the strikes the test counts (one CI run saw a
    first execution SUCCEED where the armed crashes should have failed it)."""
    events = clients.client("events")
    sweeper_arn = clients.client("lambda").get_function(FunctionName=stack["functions"]["sweeper"])["Configuration"][
        "FunctionArn"
    ]
    rules = events.list_rule_names_by_target(TargetArn=sweeper_arn)["RuleNames"]
    assert rules, "the stack's sweeper has no rule"
    for rule in rules:
        events.disable_rule(Name=rule)
    yield
    for rule in rules:
        events.enable_rule(Name=rule)


def test_executions_that_die_before_or_at_the_claim_are_recovered_by_the_sweeper(
    stack, deletions, monkeypatch, deployed_sweeper_paused
):
    # The sweeper runs here, on this test's clock, with the deployed sweeper's environment.
    deployed = clients.client("lambda").get_function_configuration(FunctionName=stack["functions"]["sweeper"])
    for name, value in deployed["Environment"]["Variables"].items():
        monkeypatch.setenv(name, value)
    sweeper = deletion.import_function_module("sweeper")
    state = deletion.import_function_module("erasure.state")
    table = deletions.table("deletion_requests")
    cells = []
    for step, point, times in DYING:
        user_id, request_id = new_request(deletions)
        deletions.arm_fault(step, point, request_id, faults.CRASH, times=times)
        cells.append({"cell": f"{step}.{point} x{times}", "user": user_id, "request": request_id})
    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(cells)) as pool:
        firsts = list(pool.map(lambda c: deletion.wait_for(deletions.start(c["request"]))["status"], cells))
    assert firsts == ["FAILED"] * len(cells)  # ClaimFailed: nothing gave the requests back
    # One sweeper, one clock: a sweep runs only once every execution it started has
    # ended, so no live worker's lease is judged by a clock that ran ahead of it.
    clock, sweeps = time.time(), 0
    while sweeps < SWEEPER_PERIODS:
        waiting = [state.read(table, c["request"]) for c in cells]
        waiting = [r for r in waiting if r.status.value not in ("COMPLETED", "FAILED")]
        if not waiting:
            break
        # The next moment a sweep can see each of them: past its lease, due time plus grace, or retry time.
        clock = (
            max([clock] + [(r.lease_expires_at or 0) + sweeper.config.schedule_grace_seconds() for r in waiting]) + 1
        )
        restarted = sweep_in_process(now=clock)["restarted"]
        sweeps += 1
        for name in restarted:
            deletion.wait_for(deletions.executions_of(name)[0]["executionArn"])
    results = [
        {
            "cell": c["cell"],
            "status": deletions.request_status(c["request"]),
            "leftovers": deletions.leftovers(c["user"]),
            "goodbyes": deletions.goodbyes(c["user"]),
        }
        for c in cells
    ]
    print(f"\n{len(cells)} dying cells in {time.monotonic() - began:.0f} s, {sweeps} sweeps")
    wrong = [r for r in results if (r["status"], r["leftovers"], r["goodbyes"]) != ("COMPLETED", GONE, 1)]
    assert wrong == [], wrong
    # Each dead execution costs one sweep: the first sweep after a request is overdue
    # (past due plus grace, or past its lease) restarts it; the restart that died too
    # is restarted by the sweep after that.
    assert sweeps <= 2


def test_the_suite_stack_deploys_the_suites_timeouts_and_visibilities(stack):
    # conftest passes these to Terraform (the root's `functions` and `queues`); the
    # lessons' own stay as functions.tf and queues.tf have them. The crash tests above
    # wait out the deletion timeouts, which are shorter than the lessons'.
    from idemlab import module_spec
    from idemlab.lessons.queues import Orders
    from support.suite_timeouts import TEST_FUNCTION_TIMEOUTS, VISIBILITY_PER_FUNCTION_TIMEOUT

    lam = clients.client("lambda")
    deployed = {
        key: lam.get_function_configuration(FunctionName=stack["functions"][key])["Timeout"]
        for key in TEST_FUNCTION_TIMEOUTS
    }
    assert deployed == TEST_FUNCTION_TIMEOUTS
    lessons = {key: int(module_spec.function(key)["timeout"]) for key in TEST_FUNCTION_TIMEOUTS}
    assert all(deployed[key] < lessons[key] for key in ("delete_records", "delete_files", "naive_deletion_worker"))
    orders = Orders(stack)
    for source in module_spec.default("event_sources").values():
        assert (
            orders.visibility_timeout(source["queue"]) == VISIBILITY_PER_FUNCTION_TIMEOUT * deployed[source["function"]]
        ), source


def test_the_sweeper_alarm_watches_its_errors_and_stays_ok_when_nothing_is_published(stack):
    """Issue 24, item 3: the stuck alarm treats missing data as not breaching, so a dead
    sweeper was silent. Issue 37, item 6: watching the stuck metric's absence (breaching when
    missing) paged on every new stack. The second alarm watches the deployed sweeper's own
    Lambda errors, not breaching when missing (tests/embedded/test_alarms.py evaluates it)."""
    cloudwatch = clients.client("cloudwatch")
    stopped = cloudwatch.describe_alarms(AlarmNames=[stack["alarms"]["sweeper_stopped"]])["MetricAlarms"][0]
    assert (stopped["Namespace"], stopped["MetricName"], stopped["Dimensions"]) == (
        "AWS/Lambda",
        "Errors",
        [{"Name": "FunctionName", "Value": stack["functions"]["sweeper"]}],
    )
    assert (stopped["TreatMissingData"], stopped["Statistic"], stopped["ComparisonOperator"], stopped["Threshold"]) == (
        "notBreaching",
        "Sum",
        "GreaterThanThreshold",
        0,
    )
