"""An instructor's workshop: one stack per participant on one account, checked, costed, torn down.
What the account must hold and what the stacks cost idle: ``idemlab.account_needs``.

python -m idemlab.workshop check 30         the account's quotas against current usage, and the
                                            cost: read-only, creates nothing
python -m idemlab.workshop up 30            p01..p30: the check, then, once confirmed (or --yes),
                                            deploy and write each participant's handout
python -m idemlab.workshop up alice,bob     the same for named participants
python -m idemlab.workshop down             destroy every stack of the last `up`, then list
                                            each service and print what is left (must be 0)

`make workshop-check`, `make workshop PARTICIPANTS=...` and `make workshop-destroy` call these. A participant's name
is the prefix of every name of their stack (idemlab/settings.py, the module's prefix rule),
so two participants share nothing: no table, queue, function, role, schedule group, alarm,
log group or metric namespace (terraform/main.tf gives each its own namespace).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from botocore.exceptions import BotoCoreError, ClientError

from idemlab import account_needs, clients, handout, interrupts, progress, settings, stack


def workshop_file(backend: str) -> Path:
    """Who the last `up` on this backend and endpoint deployed (one file per endpoint, as
    stack.stack_name() keeps one working copy per endpoint)."""
    where = stack.stack_name(settings.DEFAULT_PARTICIPANT, backend).removeprefix(settings.DEFAULT_PARTICIPANT + "-")
    return settings.STATE_DIR / f"workshop-{where}.json"


# Two Terraform runs at a time by default: each is CPU-bound in the provider for a minute or
# two, and the lab's machines have two cores. On AWS the wait is mostly the provider's polls:
# raise it there (PARALLEL=8).
DEFAULT_PARALLELISM = 2
# Names generated for `PARTICIPANTS=<number>`: p01, p02, ... (sorted as numbers would be).
GENERATED_NAME = "p{:02d}"
# Resources the conformance suite creates start with this (tests/conformance/conftest.py):
# a run that was interrupted leaves them, untagged, so the leftover check looks for them too.
CONFORMANCE_PREFIX = "idemlab-conf-"


class WorkshopError(Exception):
    """A workshop command cannot go on; the message says what to do."""


def participants(spec: str) -> list[str]:
    """``"3"`` -> p01, p02, p03; ``"alice,bob"`` (commas or spaces) -> those names, checked.

    Refused: a bad name (the prefix rule), a name given twice, and a name that is another's
    name plus "-..." (alice and alice-b: every name of alice-b's stack would start with
    "alice-", so alice's leftover check would count them as alice's).
    """
    text = (spec or "").strip()
    if not text:
        raise WorkshopError("PARTICIPANTS is empty: give a number (PARTICIPANTS=30) or names (PARTICIPANTS=alice,bob)")
    if text.isdigit():
        count = int(text)
        if not 1 <= count <= 99:
            raise WorkshopError(f"PARTICIPANTS={count}: a workshop has 1 to 99 generated participants")
        return [GENERATED_NAME.format(number) for number in range(1, count + 1)]
    names = [name for name in text.replace(",", " ").split() if name]
    for name in names:
        settings.check_prefix(name, "participant")
    repeated = sorted(name for name, seen in Counter(names).items() if seen > 1)
    if repeated:
        raise WorkshopError(f"participants named more than once: {', '.join(repeated)}")
    for name in names:
        for other in names:
            if other != name and other.startswith(name + "-"):
                raise WorkshopError(
                    f"participant {other!r} starts with {name!r} plus '-': every name of {other}'s stack "
                    f"would also look like {name}'s; rename one"
                )
    return names


# ---------------------------------------------------------------- up and down


def _record(backend: str, names: list[str], resources: dict[str, int]) -> None:
    settings.STATE_DIR.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"backend": backend, "participants": names, "resources": resources}, indent=2)
    workshop_file(backend).write_text(text + "\n")


def recorded(backend: str) -> dict:
    """What the last `up` on this backend recorded: its participants and the planned resources."""
    path = workshop_file(backend)
    if not path.exists():
        raise WorkshopError(f"no workshop was set up on this backend (no .lab/{path.name}): give PARTICIPANTS=...")
    return json.loads(path.read_text())


def _each(names: list[str], action, parallel: int) -> dict[str, str]:
    """``action(name)`` for every participant, ``parallel`` at a time; the failures by name.

    After a Ctrl-C (``interrupts.stopping_safely()``) no participant is started any more; the
    ones under way end as Terraform stops them. Raises ``interrupts.Interrupted`` naming who
    is done, who was stopped mid-way and who was not started."""
    failures: dict[str, str] = {}
    done: list[str] = []
    stopped: list[str] = []

    def run(name: str) -> None:
        if interrupts.requested():
            return
        started = time.monotonic()
        try:
            action(name)
        except interrupts.Interrupted:
            stopped.append(name)
            return
        except (stack.StackError, ValueError, ClientError, BotoCoreError) as exc:
            failures[name] = str(exc)
            print(f"  {name}: FAILED after {time.monotonic() - started:.0f} s", flush=True)
            return
        done.append(name)
        print(f"  {name}: done in {time.monotonic() - started:.0f} s", flush=True)

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        list(pool.map(run, names))
    if interrupts.requested():
        untouched = [name for name in names if name not in done + stopped + list(failures)]
        raise interrupts.Interrupted(
            f"done: {_listed(done)}; stopped mid-way (Terraform recorded what it made): {_listed(stopped)}; "
            f"not started: {_listed(untouched)}"
        )
    return failures


def _listed(names: list[str]) -> str:
    return ", ".join(sorted(names)) or "none"


def check(names: list[str], backend: str | None = None, lessons: list[str] | None = None) -> dict[str, int]:
    """Print the account's quotas against its current usage and the room's need, and the idle
    cost; the planned resources of one stack. Read-only: a plan, then list and describe calls
    (QuotasTooLow when a quota cannot hold the room). ``lessons``: the slugs each stack
    provisions (None: all), so the counts and the cost are those of the chosen lessons."""
    chosen = settings.backend(backend)
    print(f"planning {names[0]}'s stack to count what one stack needs (nothing is created) ...", flush=True)
    resources = stack.planned_resources(prefix=names[0], backend=chosen, lessons=lessons)
    account = account_needs.current_account(chosen)
    for line in account_needs.quota_check(chosen, resources, len(names), account, lessons or None):
        print(line)
    for line in account_needs.cost_lines(resources, len(names)):
        print(line)
    return resources


def confirmed(count: int, backend: str, answer=input) -> bool:
    """Whether the instructor, having read the check, types "yes" to deploy now. The deploy
    starts on that answer, never on its own a moment after the check was printed."""
    try:
        return answer(f"deploy {count} stack(s) on {backend} in {settings.region()} now? type yes: ").strip() == "yes"
    except EOFError:  # no terminal to answer from
        return False


def up(
    names: list[str],
    parallel: int = DEFAULT_PARALLELISM,
    backend: str | None = None,
    yes: bool = False,
    lessons: list[str] | None = None,
) -> dict[str, dict]:
    """The check, then (once confirmed, or with ``yes``) every participant's stack deployed and
    their handouts written; their ``lab`` outputs by name."""
    chosen = settings.backend(backend)
    resources = check(names, chosen, lessons)
    if not yes and not confirmed(len(names), chosen):
        raise WorkshopError("not confirmed: nothing was deployed (YES=1, or --yes, deploys without asking)")
    _record(chosen, names, resources)  # before the deploys: a half-made workshop can still be destroyed
    print(f"deploying {len(names)} stack(s) on {chosen}, {parallel} at a time:", flush=True)
    what = f"deploying {len(names)} participants' stacks on {chosen}: resources done"
    # Each stack's deploy counts on one stage: the room's resources of the plan's count.
    with interrupts.stopping_safely(), progress.Stage(what, sum(resources.values()) * len(names), "resources") as room:
        try:
            failures = _each(
                names, lambda name: stack.deploy(prefix=name, backend=chosen, lessons=lessons, stage=room), parallel
            )
        except interrupts.Interrupted as exc:
            again = f"make workshop PARTICIPANTS={','.join(names)} YES=1"
            raise interrupts.Interrupted(
                f"the workshop's deploys were interrupted ({exc}): run `{again}` to finish"
            ) from exc
    if failures:
        raise WorkshopError(_failed("deploy", failures))
    deployed = {name: stack.outputs(prefix=name, backend=chosen) for name in names}
    for name, outputs in deployed.items():
        handout.write(handout.handout_for(name, chosen, outputs))
    print(f"handouts (one per participant, no secrets): .lab/{handout.HANDOUTS_DIR.name}/<name>.json")
    print("  each participant, in their own clone: make join HANDOUT=<their file>")
    return deployed


def down(names: list[str] | None = None, parallel: int = DEFAULT_PARALLELISM, backend: str | None = None) -> dict:
    """Destroy every participant's stack, remove what the lessons made beside them, then list
    each service: the lab resources left, by service (every count must be 0)."""
    chosen = settings.backend(backend)
    if names is None:
        names = recorded(chosen)["participants"]
    print(f"destroying {len(names)} stack(s) on {chosen}, {parallel} at a time:", flush=True)
    failures = _each(names, lambda name: _destroy(name, chosen), parallel)
    removed = remove_runtime_leftovers(names)
    for line in remove_table_backups(names):
        print(line)
    if removed:
        print(f"removed what the lessons created beside the stacks: {', '.join(removed)}")
    left = leftovers(names)
    print("left, per service (listing every resource of each service, by name, not by tag):")
    for service, found in left.items():
        shown = f": {', '.join(found[:5])}" + (" ..." if len(found) > 5 else "") if found else ""
        print(f"  {service:30} {len(found)}{shown}")
    if failures:
        raise WorkshopError(_failed("destroy", failures))
    if any(left.values()):
        raise WorkshopError("lab resources are left (above): the workshop is not torn down")
    workshop_file(chosen).unlink(missing_ok=True)
    return left


def _destroy(name: str, backend: str) -> None:
    """One participant's stack: point-in-time recovery off on its tables first, then destroy.

    Deleting a table with point-in-time recovery on leaves a SYSTEM backup of it for 35 days
    (DynamoDB API reference, BackupDetails: BackupType; developer guide,
    PointInTimeRecovery_Howitworks, "Delete a table with PITR enabled"), and `email_outbox`
    and `deletion_requests` hold erased users' addresses. With recovery off at deletion no
    such backup is made.
    """
    try:
        tables = stack.outputs(prefix=name, backend=backend).get("tables", {})
    except stack.StackError:  # never deployed here: nothing of it to switch off
        tables = {}
    disable_point_in_time_recovery(tables.values())
    stack.destroy(prefix=name, backend=backend)


def disable_point_in_time_recovery(tables) -> list[str]:
    """Point-in-time recovery off on each named table that has it on; the tables changed."""
    dynamodb = clients.client("dynamodb")
    changed = []
    for table in tables:
        try:
            described = dynamodb.describe_continuous_backups(TableName=table)["ContinuousBackupsDescription"]
        except dynamodb.exceptions.TableNotFoundException:
            continue
        if described.get("PointInTimeRecoveryDescription", {}).get("PointInTimeRecoveryStatus") == "ENABLED":
            dynamodb.update_continuous_backups(
                TableName=table, PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": False}
            )
            changed.append(table)
    return changed


def table_backups(names: list[str]) -> list[dict]:
    """Every DynamoDB backup (ours and the system's) of a table that belongs to the workshop."""
    mine = _names_of(names)
    found = clients.client("dynamodb").get_paginator("list_backups").paginate(BackupType="ALL")
    return [summary for summary in found.search("BackupSummaries[]") if summary["TableName"].startswith(mine)]


def remove_table_backups(names: list[str]) -> list[str]:
    """Delete the workshop tables' backups (a SYSTEM one is what deleting a table with point-in-time
    recovery on leaves); lines naming each, and why one could not be deleted."""
    dynamodb = clients.client("dynamodb")
    lines = []
    for summary in table_backups(names):
        label = f"{summary['BackupType']} backup {summary['BackupName']} of {summary['TableName']}"
        try:
            dynamodb.delete_backup(BackupArn=summary["BackupArn"])
        except ClientError as exc:
            error = exc.response["Error"]
            lines.append(
                f"could not delete the {label} ({error.get('Code')}: {error.get('Message')}); "
                f"it expires by itself {summary.get('BackupExpiryDateTime', 'after 35 days')}: "
                "it can restore the erased users it holds until then"
            )
            continue
        lines.append(f"deleted the {label}")
    return lines


def _failed(action: str, failures: dict[str, str]) -> str:
    return f"{action} failed for {len(failures)} participant(s):\n" + "\n".join(
        f"--- {name}:\n{message}" for name, message in sorted(failures.items())
    )


# ---------------------------------------------------------------- the proof


def _names_of(names: list[str]) -> tuple[str, ...]:
    """The name prefixes of the workshop's resources: each participant's, and the conformance suite's."""
    return (*(f"{name}-" for name in names), CONFORMANCE_PREFIX)


def leftovers(names: list[str]) -> dict[str, list[str]]:
    """Every resource of each service whose name belongs to the workshop, listing the whole
    service: an untagged resource (a variant of notebook 07's, what an interrupted conformance
    run left) is found as well as a tagged one. Every name of a stack starts with its
    participant's name and a dash (iam.tf, storage.tf, ...), log groups after their service's path."""
    mine = _names_of(names)

    def listed(service: str, operation: str, expression: str) -> list:
        # A page without the listed key (SQS answers an empty ListQueues without QueueUrls)
        # searches to None.
        found = clients.client(service).get_paginator(operation).paginate().search(expression)
        return [value for value in found if value is not None]

    def named(values) -> list[str]:
        return sorted(value for value in values if value.startswith(mine))

    def under(path: str, values) -> list[str]:
        return sorted(value for value in values if value.startswith(path) and value[len(path) :].startswith(mine))

    def mapped(mapping: dict) -> bool:
        function = mapping.get("FunctionArn", "").rsplit(":", 1)[-1]
        queue = mapping.get("EventSourceArn", "").rsplit(":", 1)[-1]
        return function.startswith(mine) or queue.startswith(mine)

    log_groups = listed("logs", "describe_log_groups", "logGroups[].logGroupName")
    queue_urls = listed("sqs", "list_queues", "QueueUrls[]")
    buckets = [bucket["Name"] for bucket in clients.client("s3").list_buckets().get("Buckets", [])]
    schedules = listed("scheduler", "list_schedules", "Schedules[]")
    return {
        "DynamoDB tables": named(listed("dynamodb", "list_tables", "TableNames[]")),
        "SQS queues": named(url.rsplit("/", 1)[-1] for url in queue_urls),
        "Lambda functions": named(listed("lambda", "list_functions", "Functions[].FunctionName")),
        "Lambda event source mappings": sorted(
            m["UUID"] for m in listed("lambda", "list_event_source_mappings", "EventSourceMappings[]") if mapped(m)
        ),
        "IAM roles": named(listed("iam", "list_roles", "Roles[].RoleName")),
        "Scheduler schedule groups": named(listed("scheduler", "list_schedule_groups", "ScheduleGroups[].Name")),
        "Scheduler schedules": sorted(
            f"{s['GroupName']}/{s['Name']}"
            for s in schedules
            if s["GroupName"].startswith(mine) or s["Name"].startswith(mine)
        ),
        "CloudWatch alarms": named(listed("cloudwatch", "describe_alarms", "MetricAlarms[].AlarmName")),
        "CloudWatch log groups": under("/aws/lambda/", log_groups) + under("/aws/vendedlogs/states/", log_groups),
        "S3 buckets": named(buckets),
        "Step Functions state machines": named(listed("stepfunctions", "list_state_machines", "stateMachines[].name")),
        "EventBridge rules": named(listed("events", "list_rules", "Rules[].Name")),
        "DynamoDB backups": sorted(f"{b['TableName']}/{b['BackupName']}" for b in table_backups(names)),
    }


def remove_runtime_leftovers(names: list[str]) -> list[str]:
    """Delete the Lambda functions the lessons created beside the stacks (notebook 07's variants:
    named after a stack's function, tagged with its participant) and their log groups. Only
    functions carrying a workshop participant's tag are touched, never one that merely shares a name."""
    lambda_ = clients.client("lambda")
    logs = clients.client("logs")
    removed = []
    mine = tuple(f"{name}-" for name in names)
    for function in lambda_.get_paginator("list_functions").paginate().search("Functions[]"):
        name = function["FunctionName"]
        if not name.startswith(mine):
            continue
        tags = lambda_.list_tags(Resource=function["FunctionArn"]).get("Tags", {})
        if tags.get("idemlab:participant") not in names:
            continue
        lambda_.delete_function(FunctionName=name)
        # A variant that never ran has no log group.
        with contextlib.suppress(logs.exceptions.ResourceNotFoundException):
            logs.delete_log_group(logGroupName=f"/aws/lambda/{name}")
        removed.append(name)
    return removed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m idemlab.workshop", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["check", "up", "down"])
    parser.add_argument(
        "participants", nargs="?", default="", help="a number (p01..pNN) or names; `down`: the last `up`'s"
    )
    parser.add_argument(
        "--parallel", type=int, default=DEFAULT_PARALLELISM, help="stacks deployed at a time (default 2)"
    )
    parser.add_argument("--yes", action="store_true", help="`up`: deploy after the check without asking")
    parser.add_argument(
        "--lessons", default=None, help="check, up: the lessons each stack provisions, by slug (default: all)"
    )
    args = parser.parse_args(argv)
    lessons = stack.parse_lessons(args.lessons)
    try:
        if args.parallel < 1:
            raise WorkshopError(f"--parallel {args.parallel}: at least 1")
        if args.command == "check":
            check(participants(args.participants), lessons=lessons)
        elif args.command == "up":
            up(participants(args.participants), args.parallel, yes=args.yes, lessons=lessons)
        else:
            down(participants(args.participants) if args.participants.strip() else None, args.parallel)
    except interrupts.Interrupted as exc:
        print(f"interrupted: {exc}", file=sys.stderr)
        return 130  # as a shell reports a command ended by SIGINT
    except (WorkshopError, account_needs.QuotasTooLow, stack.StackError, ValueError, ClientError, BotoCoreError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
