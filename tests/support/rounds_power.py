"""Rounds to first detection: each race test's defect put back, and counted.

A race test repeats rounds because the defect it guards shows in only some of them. To
size its count, this puts the defect back (in this process or in a backend started here,
never in the product's code) and runs the test's own round until the first round that
the test would fail, trial after trial; `report` makes the table of docs/DESIGN.md's
"Rounds and their power" from the raw lines::

    .venv/bin/python tests/support/rounds_power.py dynamodb-put --cap 4000 --out docs/rounds-power/dynamodb-put.jsonl
    .venv/bin/python tests/support/rounds_power.py report docs/rounds-power/*.jsonl

Rounds are independent (each races a fresh key), so a run of rounds is cut into trials
at each detection: a trial's length is the rounds up to and including a detection. A
trial still undetected when the case's round budget (``--cap``) is spent is censored and
reported as such. The raw numbers (one line a round batch, then the summary) go to
``--out`` as JSON lines.

A test's count that detects the defect in 99.9 % of runs is
ceil(ln(0.001) / ln(1 - p)), p being the detections per round.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS), str(TESTS.parent)]

# The embedded backend, with its DynamoDB write lock taken out when argv[1] is "no-lock"
# (moto alone again), and its threads switching every argv[2] seconds (Python's default:
# 0.005; shorter makes a thread lose the GIL inside moto's check-then-write more often).
SERVER = """
import sys, types
from idemlab.embedded import dynamodb_atomic
if sys.argv[1] == "no-lock":
    dynamodb_atomic._LOCK = types.SimpleNamespace(acquire=lambda *a: True, release=lambda: None)
sys.setswitchinterval(float(sys.argv[2]))
from idemlab.embedded.server import main
main(sys.argv[3:])
"""


def start_backend(lock: bool, switch_interval: float = 0.005) -> tuple[subprocess.Popen, str]:
    from idemlab.embedded.server import free_port, health

    port = free_port()
    command = [sys.executable, "-c", SERVER, "lock" if lock else "no-lock", str(switch_interval)]
    process = subprocess.Popen([*command, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while not health(url, timeout=2):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(
                f"the backend on {url} did not answer its health check within 120 s (exit code {process.poll()})"
            )
        time.sleep(0.2)
    os.environ.update(
        {
            "AWS_ENDPOINT_URL": url,
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1",
        }
    )
    return process, url


def create_table(hash_key: str = "pk", name: str | None = None) -> str:
    from idemlab import clients

    name = name or f"t-{uuid.uuid4().hex[:10]}"
    clients.client("dynamodb").create_table(
        TableName=name,
        KeySchema=[{"AttributeName": hash_key, "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": hash_key, "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


@dataclasses.dataclass(frozen=True)
class Case:
    """A race test's round with its defect put back."""

    defect: str  # what was put back, in words
    lock: bool  # whether the backend keeps its DynamoDB write lock
    # Given the backend's URL, sets the case up and returns `batch(n)`: for each of n
    # rounds run, whether the test would have failed on it.
    rounds: Callable[[str], Callable[[int], list[bool]]]


def dynamodb_case(operation: str):
    """tests/embedded/test_dynamodb.py: 50 clients in 2 processes, one round per key."""

    def factory(url):
        from idemlab import clients
        from support.dynamodb_race import SCHEDULED, race

        def batch(n: int) -> list[bool]:
            table = create_table()
            if operation == "claim_update":
                for round_no in range(n):
                    clients.client("dynamodb").put_item(
                        TableName=table, Item={"pk": {"S": f"k-{round_no}"}, "status": {"S": SCHEDULED}}
                    )
            winners = race(url, operation, table, n, 50, 2, prefix="k")
            return [winners[r] != 1 for r in range(n)]

        return batch

    return Case("the backend's DynamoDB write lock taken out (plain moto)", False, factory)


def deletion_case(kind: str):
    """tests/lessons/deletion/test_concurrency.py: 12 threads, the test's own round and checks."""

    def factory(url):
        import boto3

        from idemlab.barrier import all_at_once
        from idemlab.lessons import deletion

        state = deletion.import_function_module("erasure.state")
        claims = deletion.import_function_module("erasure.claims")
        errors = deletion.import_function_module("erasure.errors")
        if kind == "zombie-fence":
            from boto3.dynamodb.conditions import Attr

            processing = state.Status.PROCESSING.value
            claims.holds_claim = lambda claim: Attr("status").eq(processing)  # the token check left out
        name = create_table("deletion_request_id")
        tables = [boto3.resource("dynamodb", endpoint_url=url).Table(name) for _ in range(12)]
        t0, lease = 1_800_000_000, 60

        def race(action):
            return all_at_once([lambda i=i: action(tables[i], i) for i in range(12)], capture_errors=True)

        def one_round() -> bool:
            request_id = f"del-{uuid.uuid4().hex[:12]}"
            state.create(tables[0], request_id, "user-race", t0, now=t0)
            if kind == "claim":
                results = race(lambda t, i: claims.claim(t, request_id, f"worker-{i}", lease, now=t0))
                winners = [r for r in results if r.outcome is claims.ClaimOutcome.CLAIMED]
                stored = state.read(tables[0], request_id)
                return len(winners) != 1 or (stored.fencing_token, stored.lease_owner) != (1, winners[0].claim.owner)
            if kind == "cancel":

                def act(t, i):
                    if i % 2:
                        return "cancel" if state.cancel(t, request_id, "user-race", now=t0)[0] else None
                    return "claim" if claims.claim(t, request_id, f"worker-{i}", lease, now=t0).claim else None

                won = [r for r in race(act) if r]
                if len(won) != 1:
                    return True
                expected = state.Status.CANCELLED if won[0] == "cancel" else state.Status.PROCESSING
                return state.read(tables[0], request_id).status is not expected
            zombie = claims.claim(tables[0], request_id, "zombie", lease, now=t0).claim
            later = t0 + lease + 1
            holder = claims.claim(tables[0], request_id, "holder", lease, now=later).claim
            holder_steps = set()

            def act(t, i):
                writer = zombie if i % 2 else holder
                step = state.STEPS[(i // 2) % len(state.STEPS)]
                try:
                    claims.record_step(t, writer, step, lease, now=later + 1)
                except errors.ClaimLostError:
                    return f"{writer.owner}_refused"
                if writer is holder:
                    holder_steps.add(step)
                return f"{writer.owner}_accepted"

            tally = Counter(race(act))
            stored = state.read(tables[0], request_id)
            return (
                tally != Counter({"zombie_refused": 6, "holder_accepted": 6})
                or stored.steps_done != holder_steps
                or (stored.fencing_token, stored.lease_owner) != (2, "holder")
            )

        return lambda n: [one_round() for _ in range(n)]

    if kind == "zombie-fence":
        return Case("the fencing token left out of the progress write's condition", True, factory)
    return Case("the backend's DynamoDB write lock taken out (plain moto)", False, factory)


def goodbyes_case():
    """tests/lessons/deletion/test_lessons.py: 12 threads count their own users' goodbye emails
    through one Deletions, switching threads every microsecond, as the test does."""

    def factory(url):
        from idemlab.barrier import all_at_once
        from idemlab.lessons import deletion

        outbox = create_table("idempotency_key")
        stack = {
            "tables": {"email_outbox": outbox},
            "buckets": {"user_files": ""},
            "state_machines": {"account_deletion": ""},
            "queues": {"deletion_dlq": ""},
        }
        deletions = deletion.Deletions(stack)
        one = deletions.table("email_outbox")
        deletions.table = lambda key: one  # every thread on one resource, one condition builder
        users = {f"u{uuid.uuid4().hex[:10]}": n % 3 for n in range(12)}
        for user_id, emails in users.items():
            for n in range(emails):
                item = {"idempotency_key": f"goodbye#{user_id}-{n}", "kind": "goodbye", "user_id": user_id}
                one.put_item(Item={**item, "deletion_request_id": f"del-{user_id}"})

        def one_round() -> bool:
            interval = sys.getswitchinterval()
            sys.setswitchinterval(1e-6)
            try:
                counted = all_at_once([lambda user_id=user_id: deletions.goodbyes(user_id) for user_id in users])
            finally:
                sys.setswitchinterval(interval)
            return any(count != emails for count, emails in zip(counted, users.values(), strict=True))

        return lambda n: [one_round() for _ in range(n)]

    return Case("one boto3 Table (one condition builder) shared by the threads", True, factory)


def checkout_case(kind: str):
    """tests/lessons/checkout/test_handlers.py: the handlers in this process, 10 copies a round,
    the card processor a Lambda function on the backend (as the test's fixture has it)."""
    defects = {
        "powertools": "Powertools' claim switched off (POWERTOOLS_IDEMPOTENCY_DISABLED=1)",
        "downstream": "the card processor's own key check left out (the key not passed downstream)",
        "fault": "the fault counter read, compared and written back instead of its atomic ADD",
    }

    def factory(url):
        from idemlab import build, clients, module_spec
        from idemlab import faults as idemlab_faults
        from idemlab.lessons import checkout
        from idemlab.module_spec import table_keys
        from support import checkout_in_process as in_process

        keys = table_keys("card_processor", *checkout.FUNCTION_KEYS)
        suffix = uuid.uuid4().hex[:8]
        names = {key: create_table(hash_key, f"power-{key}-{suffix}") for key, hash_key in keys.items()}
        iam = clients.client("iam")
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
            ],
        }
        role = iam.create_role(RoleName=f"power-{suffix}", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
        processor = f"power-card-processor-{suffix}"
        clients.client("lambda").create_function(
            FunctionName=processor,
            Runtime="python3.12",
            Role=role,
            Handler="card_processor.handler",
            Code={"ZipFile": build.zip_bytes(build.source_files(checkout.FUNCTION_DIR))},
            Timeout=int(module_spec.function("card_processor")["timeout"]),
            Environment={"Variables": module_spec.environment("card_processor", names)},
        )
        os.environ.update(in_process.environment(names, processor))
        ledger = checkout.Ledger(names["ledger"])

        if kind == "fault":
            faults = in_process.import_handler("charging.faults")
            handler_errors = in_process.import_handler("charging.errors")
            contract = in_process.import_handler("shared.faults")  # the copy charging.faults strikes with

            def counted_without_add(key: str) -> str | None:
                """The fault's count read, compared and written back: no atomic ADD."""
                table = contract.clients.dynamodb_table("faults")
                item = table.get_item(Key={contract.FAULT_KEY: key}, ConsistentRead=True).get("Item")
                if item is None or item[contract.REACHED] >= item[contract.TIMES]:
                    return None
                table.put_item(Item={**item, contract.REACHED: item[contract.REACHED] + 1})
                return item[contract.KIND]

            contract._take = counted_without_add
            context = in_process.InvocationContext(5)
            round_number = iter(range(10**9))
            faults_table = clients.resource("dynamodb").Table(names["faults"])

            def fault_round() -> bool:
                times = 1 + next(round_number) % 3
                key = f"fault-race-{uuid.uuid4().hex[:8]}"
                idemlab_faults.arm(faults_table, faults.AFTER_CHARGE, key, faults.LOSE_ANSWER, times)

                def reach_the_point() -> dict:
                    try:
                        faults.strike(faults.AFTER_CHARGE, key, context)
                    except handler_errors.ChargeUnknownError:
                        return {"fired": True}
                    return {"fired": False}

                return sum(a["fired"] for a in checkout.concurrently(reach_the_point, 12)) != times

            return lambda n: [fault_round() for _ in range(n)]

        strategy = "powertools" if kind == "powertools" else "handrolled"
        options = {"check_act_delay_ms": 20}  # the test's RACE_WINDOW_MS
        if kind == "powertools":
            os.environ["POWERTOOLS_IDEMPOTENCY_DISABLED"] = "1"

        def checkout_round() -> bool:
            request = checkout.order(prefix=f"power-{strategy}", **options)
            checkout.concurrently(lambda: in_process.invoke_in_process(strategy, request), 10)
            return ledger.count(request["idempotency_key"]) != 1

        return lambda n: [checkout_round() for _ in range(n)]

    return Case(defects[kind], True, factory)


def stack_case(kind: str):
    """tests/lessons/checkout/test_stack.py: the deployed stack, each copy a real Invoke, 10 copies
    a round after a warm-up round, as the test runs them."""
    defects = {
        "powertools": "Powertools' claim switched off in the deployed function (POWERTOOLS_IDEMPOTENCY_DISABLED=1)",
        "downstream": "the card processor's own key check left out (the key not passed downstream)",
    }

    def factory(url):
        from idemlab import clients
        from idemlab import stack as lab_stack
        from idemlab.lessons import checkout
        from support.suite_timeouts import suite_functions, suite_queues

        os.environ.update(
            {
                "BACKEND": "embedded",
                "LAB_PORT": url.rsplit(":", 1)[1],
                "TF_VAR_functions": json.dumps(suite_functions()),
                "TF_VAR_queues": json.dumps(suite_queues()),
            }
        )
        lab = lab_stack.deploy()
        shop = checkout.Checkout(lab)
        strategy, options = "handrolled", {"check_act_delay_ms": 100}  # the test's RACE_WINDOW_MS
        if kind == "powertools":
            strategy = "powertools"
            lambda_ = clients.client("lambda")
            name = lab["functions"][checkout.function_key(strategy)]
            variables = lambda_.get_function_configuration(FunctionName=name)["Environment"]["Variables"]
            variables["POWERTOOLS_IDEMPOTENCY_DISABLED"] = "1"
            lambda_.update_function_configuration(FunctionName=name, Environment={"Variables": variables})
            lambda_.get_waiter("function_updated_v2").wait(FunctionName=name)
        checkout.run_rounds(shop.invoke, shop.ledger, strategy, 1, 10, **options)  # the warm-up round

        def batch(n: int) -> list[bool]:
            return [c != 1 for c in checkout.run_rounds(shop.invoke, shop.ledger, strategy, n, 10, **options)]

        return batch

    return Case(defects[kind], True, factory)


CASES = {
    "dynamodb-put": lambda: dynamodb_case("conditional_put"),
    "dynamodb-claim": lambda: dynamodb_case("claim_update"),
    "dynamodb-transact": lambda: dynamodb_case("transact_put"),
    "deletion-claim": lambda: deletion_case("claim"),
    "deletion-cancel": lambda: deletion_case("cancel"),
    "deletion-zombie": lambda: deletion_case("zombie"),
    "deletion-zombie-fence": lambda: deletion_case("zombie-fence"),
    "checkout-powertools": lambda: checkout_case("powertools"),
    "lessons-goodbyes": goodbyes_case,
    "checkout-downstream": lambda: checkout_case("downstream"),
    "checkout-fault": lambda: checkout_case("fault"),
    "stack-powertools": lambda: stack_case("powertools"),
    "stack-downstream": lambda: stack_case("downstream"),
}


def rounds_for(p: float, miss: float = 0.001) -> int | None:
    """Rounds that detect a defect of per-round probability p in all but `miss` of runs."""
    if p <= 0:
        return None
    if p >= 1:
        return 1
    return math.ceil(math.log(miss) / math.log(1 - p))


def summary(case: str, defect: str, detections: list[bool], trials_wanted: int) -> dict:
    trials, run = [], 0
    for detected in detections:
        run += 1
        if detected:
            trials.append(run)
            run = 0
    trials = trials[:trials_wanted]
    used = sum(trials) if len(trials) == trials_wanted else len(detections)
    censored = 0 if len(trials) == trials_wanted else (1 if run else 0)
    p = sum(detections[:used]) / used if used else 0.0
    ordered = sorted(trials)
    return {
        "case": case,
        "defect": defect,
        "rounds_run": used,
        "detections": sum(detections[:used]),
        "p_per_round": p,
        "trials": trials,
        "censored_trials": censored,
        "censored_after_rounds": run if censored else None,
        "median": statistics.median(ordered) if ordered else None,
        "max": ordered[-1] if ordered else None,
        "rounds_for_99_9": rounds_for(p),
    }


def lower_bound(detections: int, rounds: int, confidence: float = 0.95) -> float:
    """One-sided lower confidence bound of p (Clopper-Pearson, by bisection)."""
    if detections == 0:
        return 0.0

    def at_least(p: float) -> float:  # P(X >= detections | p)
        return 1 - sum(math.comb(rounds, k) * p**k * (1 - p) ** (rounds - k) for k in range(detections))

    low, high = 0.0, detections / rounds
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if at_least(middle) < 1 - confidence else (low, middle)
    return low


def report(paths: list[Path]) -> None:
    """One row a case from the raw lines: every round run counts towards p."""
    print(
        "| case | rounds run | detections | trials (censored) | median | max | p | 99.9 % count | p 95 % low | its count |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for path in paths:
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        detections: list[bool] = []
        for line in lines:
            if "detected_at" in line:
                found = set(line["detected_at"])
                detections += [i in found for i in range(line["rounds"])]
        result = summary(path.stem, "", detections, trials_wanted=10**9)
        low = lower_bound(result["detections"], result["rounds_run"])
        print(
            f"| {path.stem} | {result['rounds_run']} | {result['detections']} | {len(result['trials'])} "
            f"({result['censored_trials']}, after {result['censored_after_rounds']}) | {result['median']} | "
            f"{result['max']} | {result['p_per_round']:.4f} | {rounds_for(result['p_per_round'])} | {low:.4f} | "
            f"{rounds_for(low)} |"
        )


def main(argv: list[str] | None = None) -> None:
    if argv is None and sys.argv[1:2] == ["report"]:
        return report([Path(name) for name in sys.argv[2:]])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("case", choices=sorted(CASES))
    parser.add_argument("--trials", type=int, default=20, help="detections wanted (default %(default)s)")
    parser.add_argument("--cap", type=int, default=2000, help="rounds at most, in all (default %(default)s)")
    parser.add_argument("--batch", type=int, default=50, help="rounds run between checks (default %(default)s)")
    parser.add_argument("--switch-interval", type=float, default=0.005, help="the server's (default %(default)s)")
    parser.add_argument("--control", action="store_true", help="keep the backend's lock (a check of the detector)")
    parser.add_argument("--out", type=Path, required=True, help="JSON lines: every batch, then the summary")
    args = parser.parse_args(argv)
    case = CASES[args.case]()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that `finally` stops the backend
    process, url = start_backend(case.lock or args.control, args.switch_interval)
    detections: list[bool] = []
    try:
        batch = case.rounds(url)
        with args.out.open("a") as out:
            while sum(detections) < args.trials and len(detections) < args.cap:
                started = time.monotonic()
                found = batch(min(args.batch, args.cap - len(detections)))
                detections += found
                line = {"case": args.case, "switch_interval": args.switch_interval, "control": args.control}
                line |= {"rounds": len(found), "detected_at": [i for i, d in enumerate(found) if d]}
                line["seconds"] = round(time.monotonic() - started, 1)
                out.write(json.dumps(line) + "\n")
                out.flush()
                print(f"{args.case}: {len(detections)} rounds, {sum(detections)} detections", flush=True)
            result = summary(args.case, case.defect, detections, args.trials)
            out.write(json.dumps(result) + "\n")
        print(json.dumps(result))
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


if __name__ == "__main__":
    main()
