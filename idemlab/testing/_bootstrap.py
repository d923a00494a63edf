"""The handler the plugin deploys, copied into the function's zip as
``idemlab_testing_bootstrap.py``. It imports only the standard library and boto3 (which
every Python Lambda runtime has), so the same zip runs on any backend.

Without changing the handler under test (IDEMLAB_TESTING_HANDLER, "module.function"), it
times each call and reports the worker's pid next to the result, for the timeline; answers
the plugin's warm-up pings without calling the handler; and, when a crash is armed
(IDEMLAB_TESTING_CRASH: a Crash as JSON), wraps the named function so that the copies
which reach it first, as many as are armed, die there (the process exits, or it sleeps
past the function's timeout).

When the plugin explores the handler (IDEMLAB_TESTING_EXPLORE: the explorer's loopback
address and the functions named as effects, as JSON), every AWS call the handler makes is
a step, seen through botocore's event hooks (registered on every botocore session the
worker makes), and so is every named effect. After each step, and as the handler starts,
the copy tells the explorer where it is and waits for its answer: go on, die there (the
process exits) or hang until the function's timeout stops it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import json
import os
import pkgutil
import socket
import sys
import threading
import time
import traceback

HANDLER_VARIABLE = "IDEMLAB_TESTING_HANDLER"
CRASH_VARIABLE = "IDEMLAB_TESTING_CRASH"
EXPLORE_VARIABLE = "IDEMLAB_TESTING_EXPLORE"
# Armed crashes: an item per function, keyed by AWS_LAMBDA_FUNCTION_NAME (a variable every
# Lambda runtime sets, AWS docs: lambda/latest/dg/configuration-envvars.html), its `armed`
# count set by the plugin before each delivery.
CRASH_TABLE = "idemlab-testing-crashes"
WARMUP_KEY = "idemlab_testing_warmup"
REPORT_KEY = "idemlab_testing"
# How a load failure's message starts, after the runtime's "Unable to import module ...: ".
LOAD_FAILURE = "the handler "
POWERTOOLS_IDEMPOTENCY = "aws_lambda_powertools.utilities.idempotency"
# Longer than any Lambda timeout (15 minutes, AWS docs: lambda/latest/dg/gettingstarted-limits.html):
# the runtime stops the copy first.
SLEEP_PAST_ANY_TIMEOUT_SECONDS = 15 * 60 + 60


def install_crash(target: str, when: str, how: str, times: int) -> None:
    """Wrap the target function wherever a loaded module holds it (a Crash's fields as keywords:
    a field added to Crash must be handled here, or loading fails by name). `times` is armed
    in CRASH_TABLE by the plugin before each delivery, not here: copies share that count."""
    import boto3  # made at init, as the handler loads: no client's cost in the timed calls

    dynamodb = boto3.client("dynamodb")

    def crash_here() -> None:
        """Take one armed crash and die; return when none is left (another copy took it)."""
        try:
            # One atomic decrement: with two copies at the point together, one wins.
            dynamodb.update_item(
                TableName=CRASH_TABLE,
                Key={"pk": {"S": os.environ["AWS_LAMBDA_FUNCTION_NAME"]}},
                UpdateExpression="SET armed = armed - :one",
                ConditionExpression="armed > :zero",
                ExpressionAttributeValues={":one": {"N": "1"}, ":zero": {"N": "0"}},
            )
        except dynamodb.exceptions.ConditionalCheckFailedException:
            return
        print(f"idemlab.testing: crash {when} {target} ({how})", file=sys.stderr, flush=True)
        if how == "exit":
            os._exit(137)  # as an out-of-memory kill would: no cleanup, no reply
        time.sleep(SLEEP_PAST_ANY_TIMEOUT_SECONDS)

    def wrap(function):
        @functools.wraps(function)
        def crashing(*args, **kwargs):
            if when == "before":
                crash_here()
            result = function(*args, **kwargs)
            if when == "after":
                crash_here()
            return result

        return crashing

    _replace(target, wrap)


def _replace(target: str, wrap) -> None:
    """Replace the function at `target` by wrap(function), wherever a loaded module holds it."""
    parent, _, attribute = target.rpartition(".")
    owner = pkgutil.resolve_name(parent)  # "shop.payments" or "shop.payments.Client"
    static, original = inspect.getattr_static(owner, attribute), getattr(owner, attribute)
    if isinstance(static, (staticmethod, classmethod)):
        return setattr(owner, attribute, type(static)(wrap(static.__func__)))
    replacement = wrap(original)
    # `from shop.payments import charge` left a reference in other modules too.
    for module in [owner, *sys.modules.values()]:
        for name, value in list((getattr(module, "__dict__", None) or {}).items()):
            if value is original:
                setattr(module, name, replacement)


def event_digest(event) -> str:
    """Names an event the same way here and in the explorer (JSON, keys sorted)."""
    text = json.dumps(event, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# The request fields that name what a call touches, as the step map shows them.
NAMING_FIELDS = ("TableName", "QueueUrl", "FunctionName", "Bucket", "Key", "TopicArn", "StateMachineArn")


def _names(params: dict) -> dict:
    named = {}
    for field in NAMING_FIELDS:
        value = params.get(field)
        if isinstance(value, str):  # DynamoDB's Key is a map: the table names the step
            named[field] = value.rsplit("/", 1)[-1] if field == "QueueUrl" else value
    if isinstance(params.get("RequestItems"), dict):  # BatchGetItem, BatchWriteItem
        named["TableName"] = ",".join(sorted(params["RequestItems"]))
    return named


def _saw(operation: str, status: int, parsed: dict) -> str:
    """What a call's answer told the handler, in a few words."""
    if status >= 300:
        code = (parsed.get("Error") or {}).get("Code") or f"HTTP {status}"
        return code.removesuffix("Exception")  # ConditionalCheckFailed
    if operation == "GetItem":
        return "an item" if "Item" in parsed else "no item"
    if "Count" in parsed:
        return f"{parsed['Count']} items"
    if "Messages" in parsed:
        return f"{len(parsed['Messages'])} messages"
    if parsed.get("FunctionError"):
        return f"FunctionError {parsed['FunctionError']}"
    return "ok"


class Boundaries:
    """Explore mode: each step of an invocation is reported to the explorer, which answers
    what the copy does next. One invocation at a time runs in an execution environment."""

    def __init__(self, address: list, effects: list[str]):
        self.address = (address[0], int(address[1]))
        self.lock = threading.RLock()  # a handler's own threads share the invocation's channel
        self.channel = None  # the explorer's connection while an invocation runs
        self.points = 0
        self.stop = None  # the point where the explorer's answer is awaited
        self.inside = threading.local()  # depth: how many named effects this thread is inside
        import botocore.handlers

        # Every botocore session registers BUILTIN_HANDLERS when it is made: the hooks reach the
        # handler's clients, Powertools' own session's too, without touching the handler.
        hooks = [("before-parameter-build", self.name_step), ("after-call", self.after_call)]
        botocore.handlers.BUILTIN_HANDLERS.extend(hooks)
        boto3 = sys.modules.get("boto3")
        if boto3 is not None and boto3.DEFAULT_SESSION is not None:  # made before this module loaded
            for event, hook in hooks:
                boto3.DEFAULT_SESSION.events.register(event, hook)
        self.effects = effects

    def install_effects(self) -> None:
        for target in self.effects:
            _replace(target, functools.partial(self._effect, target))

    def _effect(self, target: str, function):
        """A named effect is one step: the AWS calls made inside it are its own (a provider's
        client doing its work), not points where the handler could stop between them."""

        @functools.wraps(function)
        def reported(*args, **kwargs):
            self.inside.depth = getattr(self.inside, "depth", 0) + 1
            try:
                result = function(*args, **kwargs)
            except Exception as exc:
                self.inside.depth -= 1
                self.boundary({"service": "effect", "operation": target, "saw": f"raised {type(exc).__name__}"})
                raise
            self.inside.depth -= 1
            self.boundary({"service": "effect", "operation": target, "saw": "returned"})
            return result

        return reported

    def begin(self, event) -> None:
        with self.lock:
            connection = socket.create_connection(self.address)
            self.channel = connection.makefile("rwb")
            connection.close()  # the file holds the socket open
            self.points = 0
            # The answer to the start names the one later point (if any) where the copy must
            # wait for the explorer's word; at every other point it only says where it is.
            self.stop = self._ask({"kind": "start", "event": event_digest(event), "pid": os.getpid()})

    def end(self) -> None:
        with self.lock:
            if self.channel is not None:
                self.channel.close()
            self.channel = None

    def name_step(self, params, model, context, **_):
        context["idemlab_testing_step"] = {
            "service": model.service_model.service_id.hyphenize(),
            "operation": model.name,
            **_names(params),
        }

    def after_call(self, http_response, parsed, model, context, **_):
        if getattr(self.inside, "depth", 0):  # a call inside a named effect
            return
        step = dict(context.get("idemlab_testing_step") or {"operation": model.name})
        step["saw"] = _saw(model.name, http_response.status_code, parsed)
        self.boundary(step)

    def boundary(self, step: dict) -> None:
        with self.lock:
            if self.channel is None:  # a call made at init, or after the handler returned
                return
            self.points += 1
            message = {"kind": "step", "point": self.points, "step": step}
            if self.points == self.stop:
                self._ask(message)
            else:
                self._tell(message)

    def _tell(self, message: dict) -> None:
        self.channel.write(json.dumps(message).encode() + b"\n")
        self.channel.flush()

    def _ask(self, message: dict) -> int | None:
        """Tell, then do as answered; returns the later point the answer names, if any."""
        self._tell(message)
        reply = json.loads(self.channel.readline() or b'{"do": "go"}')
        answer = reply["do"]
        if answer == "exit":
            print(f"idemlab.testing: explorer ends the copy at point {self.points}", file=sys.stderr, flush=True)
            os._exit(137)  # as an out-of-memory kill would: no cleanup, no reply
        if answer == "hang":
            print(f"idemlab.testing: explorer holds the copy at point {self.points}", file=sys.stderr, flush=True)
            time.sleep(SLEEP_PAST_ANY_TIMEOUT_SECONDS)
        return reply.get("stop")


def _user_frames(exc: BaseException) -> list[str]:
    """The traceback's frames in the user's code: this module's and the import machinery's left out
    (a library's frames stay: an import that fails inside one is that library's story)."""
    frames = traceback.extract_tb(exc.__traceback__)
    kept = [
        f
        for f in frames
        if not (
            f.filename == __file__
            or f.filename.startswith("<frozen")
            or f.filename.endswith(os.path.join("importlib", "__init__.py"))
        )
    ]
    # Named as Lambda names the code's folder in a stackTrace (the plugin maps it back to the user's).
    task_root = os.environ.get("LAMBDA_TASK_ROOT", "/var/task").rstrip("/") + "/"
    return [line.rstrip("\n").replace(f'"{task_root}', '"/var/task/') for line in traceback.format_list(kept)]


def _load(name: str, crash: dict | None):
    """The handler under test, its crash point installed; else an ImportError (Runtime.ImportModuleError)
    whose message starts with LOAD_FAILURE and holds the user's own frames."""
    step = "could not load"
    try:
        module, _, function = name.rpartition(".")  # as Lambda's runtime splits a handler name
        handler = getattr(importlib.import_module(module), function)
        if crash:
            step = f"could not find the crash point {crash['target']!r}"
            install_crash(**crash)
        return handler
    except Exception as exc:
        frames = _user_frames(exc)
        trace = ["Traceback (the handler's own frames; the plugin's hidden):", *frames] if frames else []
        raise ImportError("\n".join([f"{LOAD_FAILURE}{name!r} {step}: {type(exc).__name__}: {exc}", *trace])) from exc


def _table_of(exc: BaseException) -> str | None:
    """The DynamoDB table of the AWS call that raised `exc`: botocore's _make_api_call holds its parameters."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "_make_api_call":
            params = tb.tb_frame.f_locals.get("api_params")
            if isinstance(params, dict) and isinstance(params.get("TableName"), str):
                return params["TableName"]
        tb = tb.tb_next
    return None


# Loaded at init, as Lambda imports a handler module: cold-start cost stays out of the
# timed calls. (Imported elsewhere, e.g. by the plugin for its constants, it loads nothing.)
_boundaries = None
if EXPLORE_VARIABLE in os.environ:
    _explore = json.loads(os.environ[EXPLORE_VARIABLE])
    _boundaries = Boundaries(_explore["address"], _explore["effects"])
if HANDLER_VARIABLE in os.environ:
    _handler = _load(os.environ[HANDLER_VARIABLE], json.loads(os.environ.get(CRASH_VARIABLE) or "null"))
    if _boundaries is not None:
        _boundaries.install_effects()


def handler(event, context):
    if isinstance(event, dict) and WARMUP_KEY in event:
        time.sleep(float(event[WARMUP_KEY]))  # hold the environment so the next ping needs its own
        return {REPORT_KEY: {"pid": os.getpid(), "warmup": True}}
    started = time.time()
    if _boundaries is not None:
        _boundaries.begin(event)
    try:
        result = _call(event, context)
    finally:
        if _boundaries is not None:
            _boundaries.end()
    if _from_sqs(event):
        # Lambda's SQS poller reads the function's own answer (its batchItemFailures): no report around it.
        return result
    report = {
        "pid": os.getpid(),
        "started": started,
        "ended": time.time(),
        "powertools": POWERTOOLS_IDEMPOTENCY in sys.modules,
    }
    return {REPORT_KEY: report, "result": result}


def _from_sqs(event) -> bool:
    """An event Lambda's SQS poller sends: Records whose eventSource is aws:sqs
    (AWS docs: lambda/latest/dg/with-sqs.html)."""
    records = event.get("Records") if isinstance(event, dict) else None
    return (
        isinstance(records, list)
        and bool(records)
        and all(isinstance(record, dict) and record.get("eventSource") == "aws:sqs" for record in records)
    )


def _call(event, context):
    """The handler under test; a DynamoDB error it raises names its table."""
    try:
        return _handler(event, context)
    except Exception as exc:
        table = _table_of(exc)
        # AWS's message for a missing table does not name it ("Requested resource not found"):
        # name it, in the message the runtime reports (botocore's errors keep it in args[0]).
        if table and table not in str(exc) and len(exc.args) == 1 and str(exc) == exc.args[0]:
            exc.args = (f"{exc.args[0]} (table {table!r})",)
        raise
