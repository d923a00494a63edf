"""The capstone's checker: six attacks on a learner's refund handler (notebook 08).

The handler is deployed as Lambda runs it, on the lab's embedded backend, through the
take-home plugin (`idemlab.testing`): its file and the providers (`capstone_providers.py`,
zipped as `providers.py`) make its zip; each copy runs in a Lambda worker process. Every
event is what Lambda hands a function that SQS feeds: one record per message.

The attacks, each over a few rounds of a fresh refund, counting the providers' rows:
1. concurrent duplicates: two copies of one message at the same time, as a standard
   queue may deliver one message twice;
2. a crash right after the effect: the first copy stops right after the email went (it
   runs until the function's timeout), and the message is delivered again;
3. a late redrive: the message is handled, then everything that expires within the
   redrive horizon is gone (DynamoDB TTL would have deleted it: the handler's idempotency
   records and the providers' remembered keys), and the message comes back from the
   dead-letter queue, as a new message (a redrive gives it a new message id);
4. a payload mismatch: the same refund id with another amount must be refused (the copy
   fails, or lists its message in `batchItemFailures`), not answered with the first
   refund's result, and must refund nothing;
5. sent twice by the producer: the same body in two messages, so two message ids (a
   consumer keyed on the message id does the work twice);
6. the email keeps failing: the mail provider refuses every receive of the message, so
   the refund is done and the message goes to the dead-letter queue; it is redriven days
   later, after the providers forgot their keys (a day) and within the redrive horizon,
   with the mail provider back. A handler that records the refund and the email as one
   unit loses its record at each failure (Powertools deletes the record when the
   function raises) and refunds again.

`check("capstone_refund.py")` starts a backend of its own; `attack(lab, handler)` runs on
the `idemlab` fixture's (the tests). The answer key is `capstone_answer.py`, beside this file.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
import uuid
import warnings
from copy import deepcopy
from dataclasses import dataclass, field
from pathlib import Path

import boto3
from boto3.dynamodb.conditions import Attr

from idemlab import horizon as redrive_horizon
from idemlab.build import zip_bytes
from idemlab.embedded.sqs_event_source import one_message_event
from idemlab.exercises import capstone_providers
from idemlab.testing import Crash, CrashNotReached, DuplicateEffectError, Handler
from idemlab.testing.lab import LOCAL_VARIABLES, REGION, Backend, Lab, aws_environment

PROVIDERS = Path(__file__).with_name("capstone_providers.py")
ANSWER = Path(__file__).with_name("capstone_answer.py")
# A redrive can come this long after the first send (one redrive): the model and its AWS
# sources are in idemlab/horizon.py, the one owner of the horizon.
REDRIVE_HORIZON_SECONDS = redrive_horizon.REDRIVE_HORIZON_SECONDS
QUEUE_ARN = f"arn:aws:sqs:{REGION}:000000000000:refunds"
# The handler's timeout; the crash attack's copy runs until it, so it is shorter there (with room
# for a cold start with Powertools on a loaded machine).
TIMEOUT_SECONDS = 10
CRASH_TIMEOUT_SECONDS = 5
CRASH_POINT = "providers.send_email"
EXPLORED_EFFECTS = ("providers.refund", "providers.send_email")
# The tables: the learner's idempotency table, and the providers'.
TABLES = {
    "IDEMPOTENCY_TABLE": ("id", "expiration"),
    "REFUND_LEDGER_TABLE": ("entry_id", None),
    "MAIL_LOG_TABLE": ("message_id", None),
    "PROVIDER_KEYS_TABLE": ("idempotency_key", "expiration"),
    "PROVIDER_OUTAGES_TABLE": ("outage_id", None),
}
EFFECTS = ("refund", "email")
# The email-outage attack: receives of the message before SQS moves it to the dead-letter
# queue (the source queue's redrive policy, `maxReceiveCount`), and when it is redriven,
# counted from its first send: after the providers forgot their keys, within the horizon.
OUTAGE_RECEIVES = 3
OUTAGE_REDRIVE_SECONDS = 5 * redrive_horizon.DAY
assert capstone_providers.KEY_LIFETIME_SECONDS < OUTAGE_REDRIVE_SECONDS < REDRIVE_HORIZON_SECONDS


@dataclass(frozen=True)
class Rounds:
    """How many rounds each attack runs."""

    concurrent: int = 5
    crash: int = 2
    late_redrive: int = 2
    mismatch: int = 2
    sent_twice: int = 2
    email_outage: int = 2


@dataclass
class AttackResult:
    """One attack: each round's counts of each effect, and what went wrong (empty: it held)."""

    name: str
    how: str
    counts: list[dict[str, int]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def held(self) -> bool:
        return not self.problems and bool(self.counts) and all(self.once(c) for c in self.counts)

    @staticmethod
    def once(counts: dict[str, int]) -> bool:
        return all(value == 1 for value in counts.values())

    def count_lines(self) -> list[str]:
        """Per effect: how many rounds counted it how many times, as the lessons report."""
        lines = []
        for effect in EFFECTS:
            seen: dict[int, list[int]] = {}
            for number, counts in enumerate(self.counts):
                seen.setdefault(counts.get(effect, 0), []).append(number)
            for times, rounds in sorted(seen.items()):
                verdict = "exactly once" if times == 1 else ("LOST" if times == 0 else "WRONG")
                lines.append(
                    f"  {effect:<7} {times} time{'s' * (times != 1)} in {len(rounds)} of {len(self.counts)} rounds"
                    f"  {verdict}"
                )
        return lines

    def text(self) -> str:
        head = f"{'HELD  ' if self.held else 'BROKEN'} {self.name}: {self.how}"
        notes = [f"  {note}" for note in self.notes]
        problems = [f"  ! {problem}" for problem in self.problems]
        return "\n".join([head, *self.count_lines(), *notes, *problems])


@dataclass
class CapstoneReport:
    handler: str
    attacks: list[AttackResult]

    @property
    def passed(self) -> bool:
        return all(attack.held for attack in self.attacks)

    def attack(self, name: str) -> AttackResult:
        return next(a for a in self.attacks if a.name == name)

    def __str__(self) -> str:
        verdict = "every attack held" if self.passed else "some attacks got through"
        held = sum(a.held for a in self.attacks)
        lines = [f"{self.handler}: {verdict} ({held} of {len(self.attacks)})", ""]
        return "\n".join(lines + [attack.text() + "\n" for attack in self.attacks]).rstrip()


def refund_handler(path: str | Path) -> Handler:
    """The handler in `path` (a .py file defining `handler`), zipped with the providers."""
    path = Path(path)
    if not path.is_file() or path.suffix != ".py":
        raise FileNotFoundError(f"no Python file at {path}: give the handler's .py file")
    if path.stem == "providers":
        raise ValueError("the handler's file cannot be called providers.py: that name is the providers'")
    code = zip_bytes({path.name: path, "providers.py": PROVIDERS})
    return Handler.zip(code, f"{path.stem}.handler")


def refund_request(number: int, amount: int = 1500) -> dict:
    tag = uuid.uuid4().hex[:10]
    return {
        "refund_id": f"rf-{number}-{tag}",
        "payment_id": f"pay-{number}-{tag}",
        "amount": amount,
        "currency": "EUR",
        "email": f"customer-{number}-{tag}@example.com",
    }


def sqs_event(request: dict) -> dict:
    """What Lambda hands a function SQS feeds, for one message holding `request`."""
    return one_message_event(json.dumps(request), QUEUE_ARN, REGION)


def new_event(number: int) -> dict:
    """A fresh refund, as one SQS message."""
    return sqs_event(refund_request(number))


def request_of(event: dict) -> dict:
    """The refund request an SQS event of one message carries."""
    return json.loads(event["Records"][0]["body"])


class Effects:
    """The providers' tables, counted per refund."""

    def __init__(self, lab: Lab, names: dict[str, str]):
        self.lab, self.names = lab, names

    def _resource(self, variable: str):
        dynamodb = boto3.resource("dynamodb", endpoint_url=self.lab.url, region_name=REGION)
        return dynamodb.Table(self.names[variable])

    def rows(self, variable: str, attribute: str, value: str) -> list[dict]:
        table, found, start = self._resource(variable), [], {}
        while True:
            page = table.scan(FilterExpression=Attr(attribute).eq(value), ConsistentRead=True, **start)
            found += page["Items"]
            if "LastEvaluatedKey" not in page:
                return found
            start = {"ExclusiveStartKey": page["LastEvaluatedKey"]}

    def count(self, request: dict) -> dict[str, int]:
        return {
            "refund": len(self.rows("REFUND_LEDGER_TABLE", "payment_id", request["payment_id"])),
            "email": len(self.rows("MAIL_LOG_TABLE", "to", request["email"])),
        }

    def expire_before(self, deadline: float) -> int:
        """Delete what DynamoDB's TTL would have deleted by `deadline` (epoch seconds); how many items."""
        deleted = 0
        for variable, (key, ttl) in TABLES.items():
            if ttl is None:
                continue
            table, start = self._resource(variable), {}
            while True:
                page = table.scan(ConsistentRead=True, **start)
                for item in page["Items"]:
                    expires = item.get(ttl)
                    if expires is not None and float(expires) < deadline:
                        table.delete_item(Key={key: item[key]})
                        deleted += 1
                if "LastEvaluatedKey" not in page:
                    break
                start = {"ExclusiveStartKey": page["LastEvaluatedKey"]}
        return deleted

    def mail_outage(self, to: str, down: bool) -> None:
        """Make the mail provider refuse (down) or take again (not down) emails to `to`."""
        outages = self._resource("PROVIDER_OUTAGES_TABLE")
        key = {"outage_id": capstone_providers.outage_key(to)}
        if down:
            outages.put_item(Item=key)
        else:
            outages.delete_item(Key=key)

    def records(self) -> dict[str, dict]:
        """The handler's idempotency records, by key."""
        items = self._resource("IDEMPOTENCY_TABLE").scan(ConsistentRead=True)["Items"]
        return {item["id"]: item for item in items}


def refused(copy) -> bool:
    """The copy was refused: it failed, or listed its message among the batch's failures."""
    if not copy.ok:
        return True
    result = copy.result if isinstance(copy.result, dict) else {}
    return bool(result.get("batchItemFailures"))


def _concurrent(lab: Lab, handler: Handler, effects: Effects, rounds: int) -> AttackResult:
    result = AttackResult("concurrent duplicates", "two copies of one message delivered at the same time")

    def count(event):
        return effects.count(request_of(event))

    try:
        report = lab.assert_exactly_once(handler, new_event, count, rounds=rounds, timeout=TIMEOUT_SECONDS)
    except DuplicateEffectError as failure:
        report = failure.report
    result.counts = [r.counts for r in report.rounds]
    if any(r.delivery.all_failed for r in report.rounds):
        result.problems.append("in some rounds every copy failed: " + _first_error(report.rounds))
    return result


def _crash(lab: Lab, handler: Handler, effects: Effects, rounds: int) -> AttackResult:
    how = f"the first copy stops right after {CRASH_POINT} returns (a timeout), then the message comes again"
    result = AttackResult("crash after the effect", how)

    def count(event):
        return effects.count(request_of(event))

    crash = Crash.after(CRASH_POINT, how="timeout")
    try:
        report = lab.assert_exactly_once(
            handler, new_event, count, rounds=rounds, together=False, crash=crash, timeout=CRASH_TIMEOUT_SECONDS
        )
    except DuplicateEffectError as failure:
        report = failure.report
    except CrashNotReached:
        result.problems.append(f"no copy called {CRASH_POINT}: the handler must send the email through the provider")
        return result
    result.counts = [r.counts for r in report.rounds]
    return result


def _late_redrive(lab: Lab, handler: Handler, effects: Effects, rounds: int) -> AttackResult:
    days = REDRIVE_HORIZON_SECONDS // 86400
    how = f"handled once, then redriven from the dead-letter queue {days} days later (records past their TTL gone)"
    result = AttackResult("late redrive", how)
    lifetimes = []
    for number in range(rounds):
        request = refund_request(number)
        before = effects.records()
        # In whole seconds, as the records' `expiration`: a record written in the second of the
        # send that lives exactly the horizon expires with the message, not before it.
        sent = math.floor(time.time())
        event = sqs_event(request)
        first = lab.deliver(handler, event, copies=1, timeout=TIMEOUT_SECONDS)
        if first.all_failed:
            result.problems.append(f"round {number}: the first delivery failed: {_error(first.copies[0])}")
        written = [item for key, item in effects.records().items() if key not in before]
        lifetimes += [float(item["expiration"]) - sent if "expiration" in item else None for item in written]
        # The redrive comes at the horizon, counted from the message's first send, as a new
        # message with the same body.
        effects.expire_before(sent + REDRIVE_HORIZON_SECONDS)
        lab.deliver(handler, sqs_event(request), copies=1, timeout=TIMEOUT_SECONDS)
        result.counts.append(effects.count(request))
    result.notes.append(_lifetime_note(lifetimes))
    return result


def _lifetime_note(lifetimes: list[float | None]) -> str:
    horizon = f"the redrive horizon is {REDRIVE_HORIZON_SECONDS} s ({REDRIVE_HORIZON_SECONDS // 86400} days)"
    if not lifetimes:
        return f"your handler wrote no record to IDEMPOTENCY_TABLE; {horizon}"
    if any(life is None for life in lifetimes):
        return f"your records never expire (no `expiration`): kept forever; {horizon}"
    shortest = min(lifetimes)
    return f"your records lived {shortest:.0f} s ({shortest / 86400:.1f} days) from the first send; {horizon}"


def _sent_twice(lab: Lab, handler: Handler, effects: Effects, rounds: int) -> AttackResult:
    how = "the producer sends the same refund twice: two messages, two message ids, one body"
    result = AttackResult("sent twice by the producer", how)
    for number in range(rounds):
        request = refund_request(number)
        for _ in range(2):  # each sqs_event is a message of its own, with its own id
            lab.deliver(handler, sqs_event(request), copies=1, timeout=TIMEOUT_SECONDS)
        result.counts.append(effects.count(request))
    return result


def _mismatch(lab: Lab, handler: Handler, effects: Effects, rounds: int) -> AttackResult:
    result = AttackResult("payload mismatch", "the same refund id again, with a larger amount: must be refused")
    for number in range(rounds):
        request = refund_request(number)
        first = lab.deliver(handler, sqs_event(request), copies=1, timeout=TIMEOUT_SECONDS)
        if first.all_failed:
            result.problems.append(f"round {number}: the first delivery failed: {_error(first.copies[0])}")
        changed = {**request, "amount": request["amount"] + 1000}
        second = lab.deliver(handler, sqs_event(changed), copies=1, timeout=TIMEOUT_SECONDS)
        result.counts.append(effects.count(request))
        refunds = effects.rows("REFUND_LEDGER_TABLE", "payment_id", request["payment_id"])
        amounts = sorted(int(row["amount"]) for row in refunds)
        if not refused(second.copies[0]):
            answer = json.dumps(second.copies[0].result, default=str)
            result.problems.append(f"round {number}: the changed request was not refused (it returned {answer})")
        if request["amount"] + 1000 in amounts:
            result.problems.append(f"round {number}: the changed amount was refunded (refunds: {amounts})")
    return result


def received(event: dict, count: int) -> dict:
    """`event`'s message as SQS hands it over on its `count`th receive (same message id)."""
    again = deepcopy(event)
    again["Records"][0]["attributes"]["ApproximateReceiveCount"] = str(count)
    return again


def _email_outage(lab: Lab, handler: Handler, effects: Effects, rounds: int) -> AttackResult:
    days = OUTAGE_REDRIVE_SECONDS // 86400
    how = (
        f"the mail provider refuses all {OUTAGE_RECEIVES} receives, the message goes to the dead-letter queue, "
        f"and is redriven {days} days later (provider keys forgotten) with the mail provider back"
    )
    result = AttackResult("email keeps failing", how)
    for number in range(rounds):
        request = refund_request(number)
        sent = math.floor(time.time())
        event = sqs_event(request)
        effects.mail_outage(request["email"], down=True)
        swallowed = []
        for count in range(1, OUTAGE_RECEIVES + 1):
            delivery = lab.deliver(handler, received(event, count), copies=1, timeout=TIMEOUT_SECONDS)
            if not refused(delivery.copies[0]):
                swallowed.append(count)
        effects.mail_outage(request["email"], down=False)
        if swallowed:
            # A receive that reports success has its message deleted: nothing comes back.
            result.problems.append(
                f"round {number}: receive {swallowed[0]} reported success though the email failed: "
                "SQS deletes the message, and the email is never sent"
            )
        else:
            effects.expire_before(sent + OUTAGE_REDRIVE_SECONDS)
            lab.deliver(handler, sqs_event(request), copies=1, timeout=TIMEOUT_SECONDS)
        result.counts.append(effects.count(request))
    return result


def _error(copy) -> str:
    return f"{copy.error_type}: {copy.error.get('errorMessage') if copy.error else ''}"


def _first_error(rounds) -> str:
    for r in rounds:
        for copy in r.delivery.copies:
            if not copy.ok:
                return _error(copy)
    return ""


def tables(lab: Lab) -> Effects:
    """The handler's and the providers' tables on `lab`'s backend (deleted with the lab), named
    in its environment; their effects, to count."""
    run = uuid.uuid4().hex[:8]
    names = {}
    for variable, (key, ttl) in TABLES.items():
        name = f"capstone-{variable.removesuffix('_TABLE').lower().replace('_', '-')}-{run}"
        lab.make_table(name, key=key, ttl=ttl)
        names[variable] = name
    lab.environment.update(names)
    return Effects(lab, names)


def attack(lab: Lab, handler: Handler, rounds: Rounds | None = None) -> CapstoneReport:
    """Run the attacks on `handler` with `lab`'s backend (its own tables, deleted with the lab)."""
    rounds = rounds or Rounds()
    effects = tables(lab)
    with warnings.catch_warnings():
        # Copies refused while another holds the claim are expected here: the counts say what matters.
        warnings.simplefilter("ignore")
        attacks = [
            _concurrent(lab, handler, effects, rounds.concurrent),
            _crash(lab, handler, effects, rounds.crash),
            _late_redrive(lab, handler, effects, rounds.late_redrive),
            _mismatch(lab, handler, effects, rounds.mismatch),
            _sent_twice(lab, handler, effects, rounds.sent_twice),
            _email_outage(lab, handler, effects, rounds.email_outage),
        ]
    return CapstoneReport(handler.name, attacks)


def check(path: str | Path, rounds: Rounds | None = None) -> CapstoneReport:
    """Attack the handler in `path` on an embedded backend started for this check, and stopped after."""
    handler = refund_handler(path)
    with aws_environment(LOCAL_VARIABLES), Backend() as backend:
        with aws_environment({"AWS_ENDPOINT_URL": backend.url, **LOCAL_VARIABLES}):
            with contextlib.closing(Lab(backend)) as lab:
                return attack(lab, handler, rounds)
