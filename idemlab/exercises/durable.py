"""Lesson 9 exercise (notebook 09): the goodbye email's key, checked in a deployed durable function.

``exercise(stack).check(goodbye_key)``: the learner's ``goodbye_key(request, execution_arn,
step_name)`` becomes the provider key of the send step in a durable deletion of its own (the
lesson's ``erasure.erase``, deployed beside the stack by ``idemlab.lessons.durable``), which
the check attacks with real invocations:

1. a crash after the provider took the email and before the step's checkpoint: the step
   runs again on replay, within the same execution;
2. the same deletion request started twice without an execution name, as an SQS event
   source mapping starts a durable function for each delivery: two executions;
3. two different deletion requests: each must still get its goodbye.

One email per deletion request, whatever happens, is the only passing answer.
"""

from __future__ import annotations

import inspect
import tempfile
import textwrap
import uuid
from collections.abc import Callable
from pathlib import Path

from idemlab import build, clients
from idemlab.exercises import Exercise, ExerciseFailed, expect
from idemlab.lessons import durable

LEARNER_MODULE = "learner_key"
HANDLER_MODULE = "erase_learner"
# The durable handler the check deploys around the learner's function: the lesson's deletion,
# with the learner's key for the goodbye.
HANDLER_SOURCE = """\
from aws_durable_execution_sdk_python import DurableContext, durable_execution

from erasure import erase
from {module} import {name}


@durable_execution
def handler(event: dict, context: DurableContext) -> dict:
    return erase(event, context, {name})
"""

HINT = """\
The provider keeps one email per key. Ask of each candidate key: is it the same every time
this deletion's goodbye is sent, and different for every other deletion?
- The send step runs again after a crash between the email and its checkpoint: same
  execution, same step name. A key of the execution and the step survives that.
- An SQS mapping starts a new execution for every delivery of the message: a new execution
  ARN. So the execution cannot be part of the key.
- What stays the same on every copy of one request, and differs between requests, is in
  the request itself (request["deletion_request_id"])."""


SHARED_KEY = (
    "a deletion request got no goodbye at all: its key is the key of an earlier deletion, so the "
    "provider took it for a repeat. The key must differ between deletion requests."
)


def goodbye_key(request: dict, execution_arn: str, step_name: str) -> str:
    """The answer key: the deletion request's own id, the same however many executions it gets."""
    return f"goodbye#{request['deletion_request_id']}"


def verify(candidate: Callable, stack: dict) -> str:
    lesson = durable.Durables(stack)
    name = deploy_candidate(stack, candidate)
    lesson.stack = {**stack, "functions": {**stack["functions"], "candidate": name}}
    try:
        return _attack(lesson)
    finally:
        clients.client("lambda").delete_function(FunctionName=name)


def _attack(lesson: durable.Durables) -> str:
    crashed = lesson.seed()
    lesson.arm_crash_after_send(crashed)
    run = lesson.start("candidate", crashed)
    expect(not run.failed, f"the deletion failed: {run.answer}")
    sent = lesson.emails(crashed["user_id"])
    expect(
        sent == 1,
        f"after a crash between the email and its checkpoint: {sent} emails for one deletion. The send "
        "step ran again on replay; its key must be the same when it does (None sends without a key).",
    )
    twice = lesson.seed()
    for _ in range(2):  # no name: each start is an execution of its own, as a queue's mapping starts them
        again = lesson.start("candidate", twice)
        expect(not again.failed, f"the deletion failed: {again.answer}")
    sent = lesson.emails(twice["user_id"])
    expect(sent, SHARED_KEY)
    expect(
        sent == 1,
        f"after the same deletion request was started twice without an execution name: {sent} emails. "
        "Each start is a new execution with an ARN of its own; the key must not depend on it.",
    )
    other = lesson.seed()
    lesson.start("candidate", other)
    sent = lesson.emails(other["user_id"])
    expect(sent, SHARED_KEY)
    expect(sent == 1, f"another deletion request got {sent} emails, wanted 1.")
    return "one goodbye per deletion request: after a crash, after a second execution, and for another request"


def deploy_candidate(stack: dict, candidate: Callable) -> str:
    """The lesson's durable deletion with ``candidate`` as its key, created with the role and
    environment of the stack's ``durable.TEMPLATE_FUNCTION``; its name once it is active."""
    lambda_ = clients.client("lambda")
    template = lambda_.get_function_configuration(FunctionName=stack["functions"][durable.TEMPLATE_FUNCTION])
    name = f"{template['FunctionName'][:30]}-ex9-{uuid.uuid4().hex[:6]}"
    lambda_.create_function(
        FunctionName=name,
        Runtime=durable.RUNTIME,
        Role=template["Role"],
        Handler=f"{HANDLER_MODULE}.handler",
        Code={"ZipFile": candidate_zip(candidate)},
        Timeout=durable.FUNCTION_TIMEOUT_SECONDS,
        Environment={"Variables": template["Environment"]["Variables"]},
        Tags=lambda_.list_tags(Resource=template["FunctionArn"])["Tags"],
        DurableConfig={
            "ExecutionTimeout": durable.EXECUTION_TIMEOUT_SECONDS,
            "RetentionPeriodInDays": durable.RETENTION_DAYS,
        },
    )
    lambda_.get_waiter("function_active_v2").wait(FunctionName=name)
    return name


def candidate_zip(candidate: Callable) -> bytes:
    """The lesson's zip plus the candidate's source as a module and the handler around it."""
    try:
        source = textwrap.dedent(inspect.getsource(candidate))
    except (OSError, TypeError) as exc:
        raise ExerciseFailed(f"cannot read the source of {candidate!r}: define it with def in a cell") from exc
    with tempfile.TemporaryDirectory() as folder:
        learner = Path(folder) / f"{LEARNER_MODULE}.py"
        learner.write_text(source)
        handler = Path(folder) / f"{HANDLER_MODULE}.py"
        handler.write_text(HANDLER_SOURCE.format(module=LEARNER_MODULE, name=candidate.__name__))
        files = {**build.source_files(durable.FUNCTIONS_DIR), **build.bundled_files()}
        return build.zip_bytes({**files, learner.name: learner, handler.name: handler})


exercise = Exercise(
    title="The goodbye's key",
    hint_text=HINT,
    solution_fn=goodbye_key,
    verify=verify,
)
