"""The handler the plugin deploys, copied into the function's zip as
``idemlab_testing_bootstrap.py``. It imports only the standard library and boto3 (which
every Python Lambda runtime has), so the same zip runs on any backend.

Without changing the handler under test (IDEMLAB_TESTING_HANDLER, "module.function"), it
times each call and reports the worker's pid next to the result, for the timeline; answers
the plugin's warm-up pings without calling the handler; and, when a crash is armed
(IDEMLAB_TESTING_CRASH: a Crash as JSON), wraps the named function so that the copies
which reach it first, as many as are armed, die there (the process exits, or it sleeps
past the function's timeout).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import os
import pkgutil
import sys
import time
import traceback

HANDLER_VARIABLE = "IDEMLAB_TESTING_HANDLER"
CRASH_VARIABLE = "IDEMLAB_TESTING_CRASH"
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
if HANDLER_VARIABLE in os.environ:
    _handler = _load(os.environ[HANDLER_VARIABLE], json.loads(os.environ.get(CRASH_VARIABLE) or "null"))


def handler(event, context):
    if isinstance(event, dict) and WARMUP_KEY in event:
        time.sleep(float(event[WARMUP_KEY]))  # hold the environment so the next ping needs its own
        return {REPORT_KEY: {"pid": os.getpid(), "warmup": True}}
    if _from_sqs(event):
        # Lambda's SQS poller reads the function's own answer (its batchItemFailures): no report around it.
        return _call(event, context)
    started = time.time()
    result = _call(event, context)
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
