"""One module of plumbing per lesson. Each takes the deployed stack the same way: ``stack``
is the Terraform stack's ``lab`` output (docs/DESIGN.md), names by key, and a lesson's
handle on it is a ``Deployment``. A lesson's notebook and its tests use the same module,
so what the notebook shows is what CI checks."""

from __future__ import annotations

import ast
import json
import time
from collections.abc import Callable
from typing import Any, TypeVar

from idemlab import clients, pictures, progress, settings

T = TypeVar("T")
# A wait shorter than this shows nothing: a learner notices silence after about three seconds.
SHOW_WAIT_AFTER_SECONDS = 3

# The most lines a lesson cell shows of a file: enough for the lines that matter, short
# enough that the cell is read rather than scrolled past. The rest is a link away.
EXCERPT_LINES = 15


class FunctionFailed(RuntimeError):
    """A function answered an invocation with an error (FunctionError); ``answer`` holds it."""

    def __init__(self, function: str, answer: Any):
        super().__init__(f"{function} failed: {answer}")
        self.answer = answer


def invoke(lambda_, function: str, event: Any) -> Any:
    """Invoke ``function`` synchronously and return its answer; a function error raises FunctionFailed."""
    response = lambda_.invoke(FunctionName=function, Payload=json.dumps(event).encode())
    answer = json.loads(response["Payload"].read() or b"null")
    if response.get("FunctionError"):
        raise FunctionFailed(function, answer)
    return answer


def table(stack: dict, key: str):
    """A boto3 Table of the stack (``"deletion_requests"``, ``"stock"``, ...) on a resource of its own: a resource
    builds every condition with one shared builder, so threads sharing one can swap placeholders and lose a clause."""
    return clients.resource("dynamodb").Table(stack["tables"][key])


class Deployment:
    """A lesson's handle on the deployed stack: its tables and functions by key."""

    def __init__(self, stack: dict, **lambda_config):
        self.stack = stack
        self.lambda_ = clients.client("lambda", **lambda_config)

    def table(self, key: str):
        """A boto3 Table of the stack, on a resource of its own (``table``): safe in any thread."""
        return table(self.stack, key)

    def invoke(self, function_key: str, event: Any) -> Any:
        """Invoke a deployed function and return its answer; a function error raises FunctionFailed."""
        return invoke(self.lambda_, self.stack["functions"][function_key], event)


def poll(
    read: Callable[[], T],
    seconds: float,
    every: float,
    until: Callable[[T], Any] = bool,
    what: str = "",
    shown: str = "",
) -> T:
    """``read()`` every ``every`` s until ``until`` holds for its value or ``seconds`` have passed; the last
    value, or a TimeoutError naming ``what`` and the last value if ``what`` was given and the wait was in vain.

    A wait past SHOW_WAIT_AFTER_SECONDS shows progress (``idemlab.progress``), named by ``shown``
    (else ``what``): "waiting for <it>", the checks made and the time so far."""
    started = time.monotonic()
    deadline = started + seconds
    stage = None
    try:
        while True:
            value = read()
            if until(value):
                return value
            now = time.monotonic()
            if now >= deadline:
                break
            if stage is None and (shown or what) and now - started >= SHOW_WAIT_AFTER_SECONDS:
                what_for = f"waiting for {shown or what} (at most {seconds:.0f} s)"
                stage = progress.Stage(what_for, unit="checks", since=started)
            if stage is not None:
                stage.advance()
            time.sleep(every)
    finally:
        if stage is not None:
            stage.close()
    if what:
        raise TimeoutError(f"{what}: not seen within {seconds:.0f} s; last saw {value!r}")
    return value


def scan(table: str, dynamodb=None, **options) -> list[dict]:
    """Every item of ``table`` (a name) in one consistent scan; ``options`` add a filter or a
    projection. The default client is the resource's, which takes conditions and Python values."""
    dynamodb = dynamodb or clients.resource("dynamodb").meta.client
    pages = dynamodb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True, **options)
    return [item for page in pages for item in page["Items"]]


def queue_depth(url: str, sqs=None) -> int:
    """Messages on a queue, visible or in flight."""
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attributes = (sqs or clients.client("sqs")).get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(attributes[name]) for name in names)


def draw_lanes(
    marks: list[tuple],
    xlabel: str,
    title: str = "",
    ax=None,
    lanes: list[str] | None = None,
    lane_inches: float = 0.5,
    width: float = 10,
):
    """Marks in lanes over a shared x axis: each ``(x, lane, label, outcome)`` a green dot
    (outcome True), a red cross (False) or a grey note (None). A lane's labels alternate
    above and below it, so neighbours do not collide. The axes and each lane's row."""
    lanes = lanes or list(dict.fromkeys(lane for _, lane, _, _ in marks))
    ax = pictures.axes(ax, width, 0.6 + lane_inches * len(lanes))
    row = pictures.lanes(ax, lanes, xlabel, title)
    for lane in lanes:
        mine = sorted((mark for mark in marks if mark[1] == lane), key=lambda mark: mark[0])
        for n, (x, _, label, outcome) in enumerate(mine):
            pictures.mark(ax, x, row[lane], outcome, label, -0.3 if n % 2 == 0 else 0.3, "small")
    return ax, row


def excerpt(path: str, name: str, start: str = "", end: str = "", limit: int = EXCERPT_LINES) -> str:
    """Lines of the definition ``name`` (a function, method, class or assigned name, at any depth) in ``path``
    (relative to the repository): from its first line containing ``start`` to the next line
    containing ``end`` (both kept; empty means the definition's first or last line). Headed
    by the path and line numbers, so the reader can open the whole file. More than
    ``limit`` lines, or a name or marker not found, is an error that says which."""
    source = (settings.ROOT / path).read_text()
    lines = source.splitlines()
    definitions = [node for node in ast.walk(ast.parse(source)) if _defines(node, name)]
    if not definitions:
        raise LookupError(f"{path} defines no {name}")
    node = definitions[0]
    first = min([decorator.lineno for decorator in getattr(node, "decorator_list", [])] + [node.lineno])
    last = node.end_lineno
    if start:
        first = _line_containing(lines, start, first, last, path, name)
    if end:
        last = _line_containing(lines, end, first, last, path, name)
    count = last - first + 1
    if count > limit:
        raise ValueError(f"{path}: {name} lines {first}-{last} are {count} lines, more than {limit}; narrow start/end")
    shown = "\n".join(lines[first - 1 : last])
    return f"# {path}, lines {first}-{last} ({name})\n{shown}"


def _defines(node: ast.AST, name: str) -> bool:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == name
    if isinstance(node, ast.Assign):
        return any(isinstance(target, ast.Name) and target.id == name for target in node.targets)
    return False


def _line_containing(lines: list[str], marker: str, first: int, last: int, path: str, name: str) -> int:
    for number in range(first, last + 1):
        if marker in lines[number - 1]:
            return number
    raise LookupError(f"{path}: no line of {name} between lines {first} and {last} contains {marker!r}")


def show_excerpt(path: str, name: str, start: str = "", end: str = "", limit: int = EXCERPT_LINES) -> None:
    """Print ``excerpt(...)``: a few lines of a file, for a lesson cell."""
    print(excerpt(path, name, start, end, limit))
