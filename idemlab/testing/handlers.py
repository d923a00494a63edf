"""What `deliver` runs (`Handler`), and where a copy of it dies (`Crash`).

A handler is uploaded as a zip, as you would to Lambda: either one you give, or for a
module path the folder the module is imported from (its "code root"), without virtual
environments, caches or hidden folders. Libraries are not bundled: the embedded
backend's workers run on this interpreter, so what the tests can import (boto3,
Powertools) the handler can import too.

`Crash.after("shop.payments.charge")` makes the first copy that returns from that
function die right there (its work done, nothing after it run): the moment an
at-least-once system retries. how="exit": the worker process exits at once (an
out-of-memory kill, a crashed host); Lambda answers Runtime.ExitError. how="timeout": the
copy sleeps until the function's timeout stops it (Sandbox.Timedout), the crash every
backend shows: LocalStack 4.14 does not report a process that exits (its
test_lambda_handler_exit, in tests/aws/services/lambda_/test_lambda.py, is skipped as not
yet supported), a timeout it does.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import io
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from idemlab.build import zip_bytes

# Lambda refuses a directly uploaded zip above 50 MB (AWS docs:
# lambda/latest/dg/gettingstarted-limits.html); refuse it here first.
MAX_ZIP_BYTES = 50 * 1024 * 1024
SKIPPED_FOLDERS = {"__pycache__", "node_modules", "site-packages", "dist-packages", "build", "dist"}
# What the backend answers for a copy that died each way, and how a report says it.
HOWS = {"exit": ("Runtime.ExitError", "exits"), "timeout": ("Sandbox.Timedout", "times out")}
WHENS = ("before", "after")


class HandlerError(ValueError):
    """The handler to deliver to cannot be found or packaged."""


class CrashError(ValueError):
    """A crash point that cannot be armed as given."""


@dataclass(frozen=True)
class Handler:
    """A handler to deploy: its code as a zip, and "module.function" inside it."""

    code: bytes
    name: str
    # The folder the zip was made from (Handler.module): a copy's traceback names files there.
    root: Path | None = field(default=None, compare=False)

    @classmethod
    def module(cls, dotted: str, code_root: str | Path | None = None) -> Handler:
        """The callable at `dotted` ("shop.handlers.checkout"), from its code root
        (by default the sys.path folder the top-level module is found in)."""
        module_name, _, function = dotted.rpartition(".")
        if not module_name or not function:
            raise HandlerError(f"handler {dotted!r} must be 'module.function', e.g. 'shop.handlers.checkout'")
        top, or_zip = module_name.split(".")[0], "pass a zip with Handler.zip"
        if code_root is None:
            spec = importlib.util.find_spec(top)
            if spec is None:
                raise HandlerError(
                    f"cannot find module {top!r} for handler {dotted!r}: is its folder on sys.path (pytest's rootdir)?"
                )
            # The package's folder, or the module's file: the code root holds either.
            location = next(iter(spec.submodule_search_locations or ()), None) or spec.origin or ""
            if not (spec.submodule_search_locations or location.endswith(".py")):
                raise HandlerError(f"module {top!r} is not plain Python source ({spec.origin}); {or_zip}")
            code_root = Path(location).parent
        code_root = Path(code_root).resolve()
        if code_root.name in ("site-packages", "dist-packages"):
            raise HandlerError(
                f"{top!r} is an installed package ({code_root}); deliver your own code by module path, or {or_zip}"
            )
        code = _zip_folder_once(code_root, top)
        check_defines(code_root, module_name, function)
        return cls(code, dotted, code_root)

    @classmethod
    def zip(cls, archive: str | Path | bytes, handler: str) -> Handler:
        """A Lambda zip (a path or its bytes) and its handler, as in create_function."""
        code = archive if isinstance(archive, bytes) else Path(archive).read_bytes()
        if "." not in handler:
            raise HandlerError(f"handler {handler!r} must be 'module.function'")
        if not zipfile.is_zipfile(io.BytesIO(code)):
            raise HandlerError(f"{'the bytes given' if isinstance(archive, bytes) else archive} is not a zip file")
        return cls(code, handler)

    @classmethod
    def of(cls, handler: Handler | str) -> Handler:
        return handler if isinstance(handler, Handler) else cls.module(handler)


def zip_folder(root: Path, must_hold: str) -> bytes:
    """Zip the files under `root` (sorted, fixed timestamps: the same code, the same bytes),
    leaving out hidden folders, caches, build output and virtual environments."""
    root = root.resolve()
    if not ((root / must_hold).is_dir() or (root / f"{must_hold}.py").is_file()):
        raise HandlerError(f"code root {root} holds no module or package {must_hold!r}")
    files = {}
    for folder, subfolders, names in os.walk(root, followlinks=True):
        subfolders[:] = [
            name
            for name in subfolders
            if not (
                name.startswith(".")
                or name in SKIPPED_FOLDERS
                or name.endswith(".egg-info")
                or Path(folder, name, "pyvenv.cfg").exists()
            )  # a virtual environment
        ]
        paths = (Path(folder, name) for name in names if not name.endswith((".pyc", ".pyo")))
        files.update({path.relative_to(root).as_posix(): path for path in paths if path.is_file()})
    if sum(path.stat().st_size for path in files.values()) > MAX_ZIP_BYTES:
        raise HandlerError(f"code root {root} holds more than 50 MB; pass a zip with Handler.zip instead")
    return zip_bytes(files)


def check_defines(code_root: Path, module_name: str, function: str) -> None:
    """Read (without running) the handler's module: it must parse and define `function` at its
    top level, so that a typo fails here, in the test, before anything is deployed."""
    relative = Path(*module_name.split("."))
    source = next(
        (p for p in (code_root / f"{relative}.py", code_root / relative / "__init__.py") if p.is_file()), None
    )
    if source is None:
        raise HandlerError(f"handler '{module_name}.{function}': no module {module_name!r} under {code_root}")
    try:
        tree = ast.parse(source.read_bytes(), filename=str(source))
    except SyntaxError as exc:
        raise HandlerError(f"handler '{module_name}.{function}': {source}, line {exc.lineno}: {exc.msg}") from None
    defined, dynamic = set(), False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
            dynamic |= node.name == "__getattr__"  # a module-level __getattr__ answers any name
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.asname or alias.name.split(".")[0] for alias in node.names]
            dynamic |= "*" in names
            defined.update(names)
        else:  # assignments, and names bound inside if/try at the top level: any Name stored anywhere
            defined.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    if function not in defined and not dynamic:
        functions = sorted(n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
        raise HandlerError(
            f"handler '{module_name}.{function}': {source} defines no {function!r} "
            f"(its functions: {', '.join(functions) or 'none'})"
        )


# A session packs each code root once: its files do not change while tests run.
_zip_folder_once = functools.cache(zip_folder)


@dataclass(frozen=True)
class Crash:
    """A crash point: `when` (before/after) `target` is called, `times` copies die `how`."""

    target: str
    when: str = "after"
    how: str = "exit"
    times: int = 1

    def __post_init__(self):
        if self.when not in WHENS:
            raise CrashError(f"when must be one of {WHENS}, not {self.when!r}")
        if self.how not in HOWS:
            raise CrashError(f"how must be one of {tuple(HOWS)}, not {self.how!r}")
        if not isinstance(self.target, str) or "." not in self.target:
            raise CrashError(f"target must be a dotted name such as 'shop.payments.charge', not {self.target!r}")
        if not isinstance(self.times, int) or self.times < 1:
            raise CrashError(f"times must be a whole number of copies, at least 1, not {self.times!r}")

    @classmethod
    def after(cls, target: str, how: str = "exit", times: int = 1) -> Crash:
        """Die right after `target` returns (its effect happened, nothing after it did)."""
        return cls(target, "after", how, times)

    @classmethod
    def before(cls, target: str, how: str = "exit", times: int = 1) -> Crash:
        """Die right before `target` is called."""
        return cls(target, "before", how, times)

    @property
    def error_type(self) -> str:
        return HOWS[self.how][0]

    def describe(self) -> str:
        return f"the copy {HOWS[self.how][1]} {self.when} {self.target}"


@dataclass(frozen=True)
class Queue:
    """Deliver through an SQS queue and Lambda's event source mapping instead of Invoke.

    Each copy of an event is a message of its own (its own message id), as when a producer
    sends one event twice; the poller delivers batches of up to `batch_size`, a failed batch
    (or, with `report_batch_item_failures`, the messages the function lists) comes back
    after `visibility_timeout` seconds. A FIFO queue's copies share one message group and
    carry different deduplication ids, as a producer's retry after SQS's five-minute
    deduplication interval would (AWS docs: AWSSimpleQueueService/latest/SQSDeveloperGuide/FIFO-key-terms.html).
    """

    fifo: bool = False
    batch_size: int = 10
    report_batch_item_failures: bool = False
    # At least the function's timeout: Lambda refuses a mapping whose queue's is shorter
    # (AWS docs: lambda/latest/dg/services-sqs-configure.html). None: the function's timeout.
    visibility_timeout: int | None = None
    # Receives before SQS moves a message to a dead-letter queue (its redrive policy); None: no DLQ.
    max_receive_count: int | None = None

    def __post_init__(self):
        count = self.max_receive_count
        if count is not None and (not isinstance(count, int) or not 1 <= count <= 1000):
            # maxReceiveCount: 1 to 1,000
            # (AWS docs: AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues.html).
            raise ValueError(f"max_receive_count must be a whole number from 1 to 1000, not {count!r}")
        if not isinstance(self.batch_size, int) or not 1 <= self.batch_size <= 10:
            raise ValueError(f"batch_size must be a whole number from 1 to 10, not {self.batch_size!r}")
        if self.visibility_timeout is not None and (
            not isinstance(self.visibility_timeout, int) or self.visibility_timeout < 1
        ):
            raise ValueError(
                f"visibility_timeout must be a whole number of seconds, at least 1, not {self.visibility_timeout!r}"
            )

    def describe(self) -> str:
        return f"sent as messages to {'a FIFO' if self.fifo else 'a standard'} SQS queue"
