"""The handler the plugin deploys: it loads the handler under test and wraps it.

This file is copied into the function's zip as ``idemlab_testing_bootstrap.py``. It
imports nothing from idemlab, only the standard library and boto3 (which every Python
Lambda runtime has), so the same zip runs on any backend.

It does three things around the handler under test, without changing it:
- times each call and reports the worker's pid next to the result, for the timeline;
- answers the plugin's warm-up pings without calling the handler;
- when a crash is configured, wraps the named function so that the copy which reaches
  it first dies there (the process exits, or it sleeps past the function's timeout).

Configuration comes from the function's environment:
  IDEMLAB_TESTING_HANDLER  the handler under test, "module.function"
  IDEMLAB_TESTING_CRASH    JSON {"target", "when", "how", "table", "key"}, when armed
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import os
import sys
import time

HANDLER_VARIABLE = "IDEMLAB_TESTING_HANDLER"
CRASH_VARIABLE = "IDEMLAB_TESTING_CRASH"
WARMUP_KEY = "idemlab_testing_warmup"
REPORT_KEY = "idemlab_testing"
# Longer than any Lambda timeout (15 minutes, AWS docs: lambda/latest/dg/gettingstarted-limits.html):
# the runtime stops the copy first.
SLEEP_PAST_ANY_TIMEOUT_SECONDS = 15 * 60 + 60


def resolve(dotted: str):
    """(owner, attribute name) for "package.module.attr" or "package.module.Class.attr"."""
    parts = dotted.split(".")
    for split in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:split])
        try:
            owner = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            # Only "this prefix is not a module" means: try a shorter one.
            if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
                continue
            raise
        for name in parts[split:-1]:
            owner = getattr(owner, name)
        if not hasattr(owner, parts[-1]):
            raise AttributeError(f"{module_name!r} has no attribute {'.'.join(parts[split:])!r}")
        return owner, parts[-1]
    raise ModuleNotFoundError(f"no importable module in {dotted!r}")


class CrashPoint:
    """Kills this process at the configured point, once per armed copy."""

    def __init__(self, spec: dict):
        self.spec = spec

    @functools.cached_property
    def dynamodb(self):
        import boto3

        return boto3.client("dynamodb")

    def reached(self) -> None:
        """Take one armed crash and die; return when none is left (another copy took it)."""
        try:
            # One atomic decrement: with two copies at the point together, one wins.
            self.dynamodb.update_item(
                TableName=self.spec["table"],
                Key={"pk": {"S": self.spec["key"]}},
                UpdateExpression="SET armed = armed - :one",
                ConditionExpression="armed > :zero",
                ExpressionAttributeValues={":one": {"N": "1"}, ":zero": {"N": "0"}},
            )
        except self.dynamodb.exceptions.ConditionalCheckFailedException:
            return
        what = f"idemlab.testing: crash {self.spec['when']} {self.spec['target']}"
        if self.spec["how"] == "exit":
            print(f"{what}: the process exits", file=sys.stderr, flush=True)
            os._exit(137)  # as an out-of-memory kill would: no cleanup, no reply
        print(f"{what}: sleeping past the timeout", file=sys.stderr, flush=True)
        time.sleep(SLEEP_PAST_ANY_TIMEOUT_SECONDS)

    def install(self) -> None:
        """Wrap the target function wherever a loaded module holds it."""
        owner, attribute = resolve(self.spec["target"])
        static = inspect.getattr_static(owner, attribute)
        original = getattr(owner, attribute)
        when = self.spec["when"]

        def wrap(function):
            @functools.wraps(function)
            def crashing(*args, **kwargs):
                if when == "before":
                    self.reached()
                result = function(*args, **kwargs)
                if when == "after":
                    self.reached()
                return result

            return crashing

        if isinstance(static, (staticmethod, classmethod)):
            setattr(owner, attribute, type(static)(wrap(static.__func__)))
            return
        replacement = wrap(original)
        setattr(owner, attribute, replacement)
        # `from shop.payments import charge` left a reference in other modules too.
        for module in list(sys.modules.values()):
            namespace = getattr(module, "__dict__", None) or {}
            for name, value in list(namespace.items()):
                if value is original:
                    setattr(module, name, replacement)


def _load() -> tuple:
    name = os.environ[HANDLER_VARIABLE]
    try:
        handler = getattr(*resolve(name))
    except Exception as exc:
        raise ImportError(f"could not load the handler under test {name!r}: {type(exc).__name__}: {exc}") from exc
    crash = CrashPoint(json.loads(os.environ[CRASH_VARIABLE])) if os.environ.get(CRASH_VARIABLE) else None
    try:
        if crash:
            crash.install()
    except Exception as exc:
        raise ImportError(f"could not find the crash point {crash.spec['target']!r}: {type(exc).__name__}: {exc}") from exc
    return handler, crash


# Loaded at init, as Lambda imports a handler module: cold-start cost stays out of the
# timed calls. (Imported elsewhere, e.g. by the plugin for its constants, it loads nothing.)
_handler, _crash = _load() if HANDLER_VARIABLE in os.environ else (None, None)


def handler(event, context):
    if isinstance(event, dict) and WARMUP_KEY in event:
        time.sleep(float(event[WARMUP_KEY]))  # hold the environment so the next ping needs its own
        return {REPORT_KEY: {"pid": os.getpid(), "warmup": True}}
    started = time.time()
    result = _handler(event, context)
    return {REPORT_KEY: {"pid": os.getpid(), "started": started, "ended": time.time()}, "result": result}
