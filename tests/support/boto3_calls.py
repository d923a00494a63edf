"""The AWS permissions a Lambda function's code needs, read from its syntax tree.

Starting at the handler, every function the code can reach is read with ``ast`` (a name
that refers to a function makes it reachable, so handlers passed on as values count too),
with the module-level code of every module it imports, the lesson's own and ``shared``.
Values are followed through assignments, arguments, return values, dicts and lists, one
set of possible values per name (flow- and context-insensitive: a helper that one handler
calls with two tables would be said to touch both, never neither). What the values can be
is small, because the lab's code reaches AWS one way: a table through
``shared.clients.dynamodb_table(key)`` or a name through ``shared.settings.table(key)``,
another resource's name through ``shared.settings.required("<VARIABLE>")``, a client through
``shared.clients.client(service)`` or ``boto3.client(service)``.

Each call of a boto3 operation on such a value becomes a ``Need``: the IAM action AWS
checks for it and the resource it names. Powertools' DynamoDB persistence layer is read the
same way, from the installed package. A call of an operation name that reaches no known
value is kept as ``unresolved``: the caller must treat it as a failure, since it means the
reading missed a way the code reaches AWS.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import botocore.session

FUNCTIONS_DIR = Path(__file__).resolve().parents[2] / "functions"

# Where the operation is not authorised by the action of its own name (Service Authorization
# Reference, each service's "API operations" table: list_awslambda.html, list_amazons3.html).
ACTION_OF_OPERATION = {
    ("lambda", "invoke"): "lambda:InvokeFunction",
    ("s3", "list_objects_v2"): "s3:ListBucket",
    ("s3", "delete_objects"): "s3:DeleteObject",  # authorised per object as DeleteObject
}
# botocore's service name -> IAM's service prefix, where they differ.
IAM_PREFIX = {"stepfunctions": "states"}
# A TransactWriteItems action is authorised as the single-item operation it stands for
# (DynamoDB developer guide, "Using IAM with DynamoDB transactions",
# https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html).
TRANSACTION_ACTIONS = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}
# What boto3's Table resource offers beyond the client's operations, and its batch writer,
# whose put_item and delete_item are buffered into BatchWriteItem calls.
TABLE_METHODS = {
    "get_item": "GetItem",
    "put_item": "PutItem",
    "update_item": "UpdateItem",
    "delete_item": "DeleteItem",
    "query": "Query",
    "scan": "Scan",
}
BATCH_WRITER_METHODS = {"put_item", "delete_item"}

POWERTOOLS_LAYER = "aws_lambda_powertools.utilities.idempotency.DynamoDBPersistenceLayer"
# The shared helpers through which the lab's code makes clients and reads names: read as what
# they return (``_Reader.external``), not through their bodies.
SHARED_HELPERS = {
    "shared.clients.client",
    "shared.clients.dynamodb",
    "shared.clients.dynamodb_table",
    "shared.settings.table",
    "shared.settings.function",
    "shared.settings.required",
    "shared.settings.optional",
}


# The values the reading follows. Anything else evaluates to nothing.
@dataclass(frozen=True)
class Str:
    value: str


@dataclass(frozen=True)
class Client:
    service: str  # botocore's name: "dynamodb", "stepfunctions"


@dataclass(frozen=True)
class DynamoResource:
    pass


@dataclass(frozen=True)
class Meta:
    pass  # a Table's or the resource's ``meta``: its ``client`` is the DynamoDB client


@dataclass(frozen=True)
class Table:
    key: str  # the design key, e.g. "deletion_requests"


@dataclass(frozen=True)
class BatchWriter:
    key: str


@dataclass(frozen=True)
class Paginator:
    service: str
    method: str  # the operation it pages through: "list_objects_v2"


@dataclass(frozen=True)
class TableName:
    key: str


@dataclass(frozen=True)
class FunctionName:
    key: str


@dataclass(frozen=True)
class Env:
    variable: str  # the value of an environment variable, e.g. "USER_FILES_BUCKET"


@dataclass(frozen=True)
class External:
    name: str  # a name from outside the function folder: "boto3.client"


@dataclass(frozen=True)
class Module:
    name: str


@dataclass(frozen=True)
class Func:
    module: str
    name: str  # "handler", or "Class.method"


@dataclass(frozen=True)
class Dict:
    pairs: frozenset  # of (key, value): one pair per value a key may hold


@dataclass(frozen=True)
class List:
    items: frozenset


@dataclass(frozen=True, order=True)
class Need:
    """One permission: ``action`` on ``resource``, as the code names it."""

    action: str  # "dynamodb:PutItem"
    resource: tuple  # ("table", "ledger"), ("env", "USER_FILES_BUCKET"), ("*",)
    where: str = field(compare=False, default="")  # "checkout/card_processor.py:52"


@dataclass
class Reading:
    """What one function's code needs."""

    needs: set[Need]
    unresolved: list[str]  # "<file>:<line> <operation>": an operation call on no known value
    optional_variables: set[str]  # variables read with settings.optional: the code copes without them


@cache
def operation_names() -> frozenset[str]:
    """Every boto3 method name of an AWS operation of the services the lab calls."""
    session = botocore.session.get_session()
    names = set(TABLE_METHODS) | {"batch_writer"}
    for service in ("dynamodb", "s3", "sqs", "scheduler", "stepfunctions", "cloudwatch", "lambda", "iam", "logs"):
        model = session.get_service_model(service)
        names |= {botocore.xform_name(name) for name in model.operation_names}
    return frozenset(names)


@cache
def table_description_attributes() -> frozenset[str]:
    """The attributes of boto3's Table that it loads with DescribeTable (TableDescription's members)."""
    model = botocore.session.get_session().get_service_model("dynamodb")
    return frozenset(botocore.xform_name(name) for name in model.shape_for("TableDescription").members)


@cache
def _operation_by_method(service: str) -> dict[str, str]:
    model = botocore.session.get_session().get_service_model(service)
    return {botocore.xform_name(name): name for name in model.operation_names}


def iam_action(service: str, method: str) -> str:
    """The IAM action a boto3 client call ``method`` of ``service`` is authorised as."""
    if (service, method) in ACTION_OF_OPERATION:
        return ACTION_OF_OPERATION[service, method]
    return f"{IAM_PREFIX.get(service, service)}:{_operation_by_method(service)[method]}"


@cache
def powertools_layer_methods() -> frozenset[str]:
    """The DynamoDB client methods Powertools' persistence layer calls (``self.client.<m>``),
    read from the installed package's source."""
    import aws_lambda_powertools.utilities.idempotency.persistence.dynamodb as layer

    tree = ast.parse(Path(layer.__file__).read_text())
    methods = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == "client"
            and isinstance(node.func.value.value, ast.Name)
            and node.func.value.value.id == "self"
        ):
            methods.add(node.func.attr)
    return frozenset(methods)


class _Source:
    """One module of a function folder (or of ``shared``): its tree, imports and definitions."""

    def __init__(self, name: str, path: Path, package: str):
        self.name = name
        self.path = path
        self.package = package
        self.tree = ast.parse(path.read_text(), filename=str(path))
        self.imports: dict[str, str] = {}  # local name -> qualified name (module or module.attr)
        self.defs: dict[str, ast.FunctionDef] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.defs[node.name] = node
            elif isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        self.defs[f"{node.name}.{item.name}"] = item
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.imports[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        self.imports[top] = top
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".") if package else []
                    parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
                    base = ".".join([*parts, *([base] if base else [])])
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = f"{base}.{alias.name}"


class _Reader:
    def __init__(self, lesson: str, functions_dir: Path = FUNCTIONS_DIR):
        self.functions_dir = functions_dir
        self.roots = [functions_dir / lesson, functions_dir]
        self.sources: dict[str, _Source] = {}
        self.env: dict[tuple, set] = {}  # (module, function or None, name) -> values
        self.returns: dict[Func, set] = {}
        self.reachable: set[Func] = set()
        self.loaded_order: list[str] = []
        self.needs: set[Need] = set()
        self.unresolved: set[str] = set()
        self.optional_variables: set[str] = set()
        self.changed = False
        self.final = False  # the last pass, once values are complete, reports unresolved calls

    # Modules -------------------------------------------------------------------------
    def find(self, name: str) -> Path | None:
        relative = Path(*name.split("."))
        for root in self.roots:
            for candidate in (root / f"{relative}.py", root / relative / "__init__.py"):
                if candidate.is_file():
                    return candidate
        return None

    def load(self, name: str) -> _Source | None:
        if name in self.sources:
            return self.sources[name]
        path = self.find(name)
        if path is None:
            return None
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        source = _Source(name, path, package)
        self.sources[name] = source
        self.loaded_order.append(name)
        self.changed = True
        if "." in name:
            self.load(name.rpartition(".")[0])  # a package's __init__ runs first
        for qualified in source.imports.values():
            if not self.load(qualified):
                self.load(qualified.rpartition(".")[0])
        return source

    def resolve(self, qualified: str) -> set:
        """The value of a qualified name: a module, a function, a module global or an external."""
        if self.find(qualified):
            self.load(qualified)
            return {Module(qualified)}
        module, _, attr = qualified.rpartition(".")
        if module and self.find(module):
            return self.member(module, attr)
        return {External(qualified)}

    def member(self, module: str, attr: str) -> set:
        source = self.load(module)
        if source is None:
            return set()
        if attr in source.defs:
            return {Func(module, attr)}
        if attr in source.classes:
            return {Func(module, attr)}
        if attr in source.imports:
            return self.resolve(source.imports[attr])
        if self.find(f"{module}.{attr}"):
            return self.resolve(f"{module}.{attr}")
        return set(self.env.get((module, None, attr), set()))

    # Values ----------------------------------------------------------------------------
    def bind(self, key: tuple, values: set) -> None:
        known = self.env.setdefault(key, set())
        if not values <= known:
            known |= values
            self.changed = True

    def lookup(self, scope: tuple, name: str) -> set:
        module, function = scope
        if function is not None and (module, function, name) in self.env:
            return set(self.env[(module, function, name)])
        return self.member(module, name)

    def reach(self, func: Func) -> None:
        if func not in self.reachable:
            self.reachable.add(func)
            self.changed = True
        source = self.sources[func.module]
        if func.name in source.classes:  # a class: every method of it may run
            for name in source.defs:
                if name.startswith(f"{func.name}."):
                    self.reach(Func(func.module, name))

    def call_function(self, func: Func, args: list[set], kwargs: dict[str, set]) -> set:
        self.reach(func)
        node = self.sources[func.module].defs.get(func.name)
        if node is None:  # a class: its instance is not followed
            return set()
        params = [a.arg for a in [*node.args.posonlyargs, *node.args.args]]
        for param, values in zip(params, args, strict=False):
            self.bind((func.module, func.name, param), values)
        for name, values in kwargs.items():
            self.bind((func.module, func.name, name), values)
        return set(self.returns.get(func, set()))

    def evaluate(self, node: ast.AST | None, scope: tuple) -> set:
        if node is None:
            return set()
        match node:
            case ast.Constant(value=str() as text):
                return {Str(text)}
            case ast.Name(id=name):
                values = self.lookup(scope, name)
                for value in values:
                    if isinstance(value, Func) and f"{value.module}.{value.name}" not in SHARED_HELPERS:
                        self.reach(value)
                return values
            case ast.Attribute(value=inner, attr=attr):
                return self.attribute(self.evaluate(inner, scope), attr)
            case ast.Call():
                return self.call(node, scope)
            case ast.Dict(keys=keys, values=values):
                pairs = set()
                for key, value in zip(keys, values, strict=True):
                    evaluated = self.evaluate(value, scope)
                    if key is None:  # {**spec}
                        pairs |= {pair for v in evaluated if isinstance(v, Dict) for pair in v.pairs}
                        continue
                    for k in self.evaluate(key, scope):
                        if isinstance(k, Str):
                            pairs |= {(k.value, v) for v in evaluated}
                return {Dict(frozenset(pairs))}
            case ast.List(elts=elts) | ast.Tuple(elts=elts) | ast.Set(elts=elts):
                items = set().union(*[self.evaluate(e, scope) for e in elts]) if elts else set()
                return {List(frozenset(items))}
            case (
                ast.ListComp(elt=elt, generators=gens)
                | ast.SetComp(elt=elt, generators=gens)
                | ast.GeneratorExp(elt=elt, generators=gens)
            ):
                for gen in gens:
                    self.assign(gen.target, self.items(self.evaluate(gen.iter, scope)), scope)
                    for condition in gen.ifs:
                        self.evaluate(condition, scope)
                return {List(frozenset(self.evaluate(elt, scope)))}
            case ast.DictComp(key=key, value=value, generators=gens):
                for gen in gens:
                    self.assign(gen.target, self.items(self.evaluate(gen.iter, scope)), scope)
                self.evaluate(key, scope)
                return {Dict(frozenset(("*", v) for v in self.evaluate(value, scope)))}
            case ast.Subscript(value=inner, slice=index):
                self.evaluate(index, scope)
                return self.items(self.evaluate(inner, scope))
            case ast.BoolOp(values=values):
                return set().union(*[self.evaluate(v, scope) for v in values])
            case ast.IfExp(test=test, body=body, orelse=orelse):
                self.evaluate(test, scope)
                return self.evaluate(body, scope) | self.evaluate(orelse, scope)
            case ast.Lambda(body=body):
                self.evaluate(body, scope)  # the lambda may run: its calls count here
                return set()
            case ast.NamedExpr(target=target, value=value):
                values = self.evaluate(value, scope)
                self.assign(target, values, scope)
                return values
            case ast.Starred(value=inner) | ast.Await(value=inner):
                return self.evaluate(inner, scope)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.evaluate(child, scope)
        return set()

    @staticmethod
    def items(values: set) -> set:
        """What indexing or iterating over ``values`` may give."""
        found = set()
        for value in values:
            if isinstance(value, List):
                found |= value.items
            elif isinstance(value, Dict):
                found |= {v for _, v in value.pairs}
        return found

    def attribute(self, values: set, attr: str) -> set:
        found = set()
        for value in values:
            match value:
                case Module(name=module):
                    members = self.member(module, attr)
                    for member in members:
                        if isinstance(member, Func) and f"{member.module}.{member.name}" not in SHARED_HELPERS:
                            self.reach(member)
                    found |= members
                case External(name=name):
                    found.add(External(f"{name}.{attr}"))
                case Table(key=key) if attr == "name":
                    found.add(TableName(key))
                case Table(key=key) if attr in table_description_attributes():
                    # Read from a DescribeTable the resource makes on first use.
                    self.record("dynamodb:DescribeTable", ("table", key), "a Table attribute")
                case Table() | DynamoResource() if attr == "meta":
                    found.add(Meta())
                case Meta() if attr == "client":
                    found.add(Client("dynamodb"))
        return found

    def call(self, node: ast.Call, scope: tuple) -> set:
        args = [self.evaluate(a, scope) for a in node.args]
        kwargs: dict[str, set] = {}
        for keyword in node.keywords:
            values = self.evaluate(keyword.value, scope)
            if keyword.arg is not None:
                kwargs[keyword.arg] = values
                continue
            for value in values:  # f(**spec)
                if isinstance(value, Dict):
                    for k, v in value.pairs:
                        kwargs.setdefault(k, set()).add(v)
        where = f"{self.sources[scope[0]].path.relative_to(self.functions_dir)}:{node.lineno}"
        result: set = set()
        if isinstance(node.func, ast.Attribute):
            method = node.func.attr
            receivers = self.evaluate(node.func.value, scope)
            resolved = False
            for receiver in receivers:
                handled, values = self.operation(receiver, method, args, kwargs, where)
                resolved |= handled
                result |= values
            if isinstance(node.func.value, ast.Name) and args and method in ("append", "add", "extend"):
                added = self.items(args[0]) if method == "extend" else args[0]
                self.assign(node.func.value, {List(frozenset(added))}, scope)
            # An operation name on nothing the reading knows (or only on names from outside
            # the folder): a way to AWS it does not follow.
            unknown = all(isinstance(r, External) for r in receivers)
            if self.final and method in operation_names() and not resolved and unknown:
                self.unresolved.add(f"{where} {method}")
            callees = self.attribute(receivers, method)
        else:
            callees = self.evaluate(node.func, scope)
        for callee in callees:
            if isinstance(callee, Func) and f"{callee.module}.{callee.name}" in SHARED_HELPERS:
                result |= self.external(f"{callee.module}.{callee.name}", args, kwargs, where)
            elif isinstance(callee, Func):
                result |= self.call_function(callee, args, kwargs)
            elif isinstance(callee, External):
                result |= self.external(callee.name, args, kwargs, where)
        return result

    @staticmethod
    def first_str(args: list[set], kwargs: dict[str, set], name: str) -> list[str]:
        values = args[0] if args else kwargs.get(name, set())
        return [v.value for v in values if isinstance(v, Str)]

    def external(self, name: str, args: list[set], kwargs: dict[str, set], where: str) -> set:
        """A call into a name outside the folder, or into the shared helpers that make
        clients and read names: what it returns (and records)."""
        match name:
            case "boto3.client" | "shared.clients.client":
                return {Client(s) for s in self.first_str(args, kwargs, "service")}
            case "boto3.resource":
                return {DynamoResource()} if "dynamodb" in self.first_str(args, kwargs, "service") else set()
            case "shared.clients.dynamodb":
                return {DynamoResource()}
            case "shared.clients.dynamodb_table":
                return {Table(k) for k in self.first_str(args, kwargs, "key")}
            case "shared.settings.table":
                return {TableName(k) for k in self.first_str(args, kwargs, "key")}
            case "shared.settings.function":
                return {FunctionName(k) for k in self.first_str(args, kwargs, "key")}
            case "shared.settings.required" | "os.environ.get":
                return {Env(v) for v in self.first_str(args, kwargs, "variable")}
            case "shared.settings.optional":
                variables = self.first_str(args, kwargs, "variable")
                self.optional_variables |= set(variables)
                return {Env(v) for v in variables}
            case _ if name == POWERTOOLS_LAYER or name.endswith(".DynamoDBPersistenceLayer"):
                for value in kwargs.get("table_name", set()) | (args[0] if args else set()):
                    if isinstance(value, TableName):
                        for method in powertools_layer_methods():
                            self.record(iam_action("dynamodb", method), ("table", value.key), f"{where} (Powertools)")
        return set()

    def record(self, action: str, resource: tuple, where: str) -> None:
        # Only once the values are complete: an earlier pass may not know the resource yet.
        if self.final:
            self.needs.add(Need(action, resource, where))

    def operation(self, receiver, method: str, args, kwargs, where: str) -> tuple[bool, set]:
        """A method call on a known AWS value: (whether it was one, what it returns)."""
        match receiver:
            case Table(key=key) if method in TABLE_METHODS:
                self.record(f"dynamodb:{TABLE_METHODS[method]}", ("table", key), where)
                return True, set()
            case Table(key=key) if method == "batch_writer":
                return True, {BatchWriter(key)}
            case Table(key=key) if method in ("load", "reload"):
                self.record("dynamodb:DescribeTable", ("table", key), where)
                return True, set()
            case Client(service=service) if method == "get_paginator":
                names = self.first_str(args, kwargs, "operation_name")
                return True, {Paginator(service, name) for name in names}
            case Paginator(service=service, method=operation) if method == "paginate":
                self.client_call(service, operation, kwargs, where)
                return True, set()
            case BatchWriter(key=key) if method in BATCH_WRITER_METHODS:
                self.record("dynamodb:BatchWriteItem", ("table", key), where)
                return True, set()
            case DynamoResource() if method == "Table":
                return True, {Table(v.key) for v in (args[0] if args else set()) if isinstance(v, TableName)}
            case Client(service=service) if method in _operation_by_method(service):
                self.client_call(service, method, kwargs, where)
                return True, set()
        return False, set()

    def client_call(self, service: str, method: str, kwargs: dict[str, set], where: str) -> None:
        def named(parameter: str) -> list[tuple]:
            found = []
            for value in kwargs.get(parameter, set()):
                match value:
                    case TableName(key=key):
                        found.append(("table", key))
                    case FunctionName(key=key):
                        found.append(("function", key))
                    case Env(variable=variable):
                        found.append(("env", variable))
            return found or [("unknown", parameter)]

        if service == "dynamodb" and method == "transact_write_items":
            for item in self.items(kwargs.get("TransactItems", set())):
                for kind, spec in item.pairs if isinstance(item, Dict) else ():
                    if kind not in TRANSACTION_ACTIONS or not isinstance(spec, Dict):
                        continue
                    tables = [v.key for k, v in spec.pairs if k == "TableName" and isinstance(v, TableName)]
                    for table in tables or ["unknown"]:
                        self.record(TRANSACTION_ACTIONS[kind], ("table", table), where)
            return
        action = iam_action(service, method)
        parameter = {
            "dynamodb": "TableName",
            "lambda": "FunctionName",
            "sqs": "QueueUrl",
            "stepfunctions": "stateMachineArn",
            "s3": "Bucket",
            "scheduler": "GroupName",
        }.get(service)
        resources = named(parameter) if parameter else [("*",)]
        for resource in resources:
            self.record(action, resource, where)
        if service == "scheduler" and method == "create_schedule":
            # Creating a schedule passes its execution role to Scheduler (Service Authorization
            # Reference, list_amazoneventbridgescheduler.html: CreateSchedule's dependent action).
            for target in kwargs.get("Target", set()):
                for k, v in target.pairs if isinstance(target, Dict) else ():
                    if k == "RoleArn" and isinstance(v, Env):
                        self.record("iam:PassRole", ("env", v.variable), where)

    # Statements --------------------------------------------------------------------------
    def assign(self, target: ast.AST, values: set, scope: tuple) -> None:
        module, function = scope
        match target:
            case ast.Name(id=name):
                self.bind((module, function, name), values)
            case ast.Tuple(elts=elts) | ast.List(elts=elts):
                for element in elts:  # which part goes where is not followed
                    self.assign(element, values | self.items(values), scope)
            case ast.Starred(value=inner):
                self.assign(inner, values, scope)
            case _:
                self.evaluate(target, scope)

    def run(self, statements: list[ast.stmt], scope: tuple) -> None:
        for statement in statements:
            self.statement(statement, scope)

    def statement(self, node: ast.stmt, scope: tuple) -> None:
        match node:
            case ast.FunctionDef() | ast.AsyncFunctionDef() | ast.ClassDef():
                for decorator in node.decorator_list:
                    self.evaluate(decorator, scope)
                if isinstance(node, ast.ClassDef):
                    for item in node.body:
                        if not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                            self.statement(item, scope)
                        else:
                            for decorator in item.decorator_list:
                                self.evaluate(decorator, scope)
            case ast.Assign(targets=targets, value=value):
                values = self.evaluate(value, scope)
                for target in targets:
                    self.assign(target, values, scope)
            case ast.AnnAssign(target=target, value=value) | ast.AugAssign(target=target, value=value):
                self.assign(target, self.evaluate(value, scope), scope)
            case ast.Return(value=value):
                if scope[1] is not None:
                    func = Func(*scope)
                    known = self.returns.setdefault(func, set())
                    values = self.evaluate(value, scope)
                    if not values <= known:
                        known |= values
                        self.changed = True
            case ast.For(target=target, iter=iterable, body=body, orelse=orelse):
                self.assign(target, self.items(self.evaluate(iterable, scope)), scope)
                self.run(body + orelse, scope)
            case ast.With(items=items, body=body):
                for item in items:
                    values = self.evaluate(item.context_expr, scope)
                    if item.optional_vars is not None:
                        self.assign(item.optional_vars, values, scope)
                self.run(body, scope)
            case ast.Try(body=body, handlers=handlers, orelse=orelse, finalbody=final):
                self.run(body + orelse + final, scope)
                for handler in handlers:
                    self.evaluate(handler.type, scope)
                    self.run(handler.body, scope)
            case ast.If(test=test, body=body, orelse=orelse) | ast.While(test=test, body=body, orelse=orelse):
                self.evaluate(test, scope)
                self.run(body + orelse, scope)
            case ast.Match(subject=subject, cases=cases):
                self.evaluate(subject, scope)
                for case in cases:
                    self.run(case.body, scope)
            case ast.Import() | ast.ImportFrom() | ast.Pass() | ast.Break() | ast.Continue() | ast.Global():
                pass
            case _:
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, ast.expr):
                        self.evaluate(child, scope)
                    elif isinstance(child, ast.stmt):
                        self.statement(child, scope)

    def one_pass(self) -> None:
        for name in list(self.loaded_order):
            self.run(self.sources[name].tree.body, (name, None))
        for func in sorted(self.reachable, key=lambda f: (f.module, f.name)):
            node = self.sources[func.module].defs.get(func.name)
            if node is not None:
                self.run(node.body, (func.module, func.name))

    def read(self, module: str, function: str) -> Reading:
        if self.load(module) is None:
            raise FileNotFoundError(f"no module {module} under {self.roots}")
        self.reach(Func(module, function))
        while self.changed:
            self.changed = False
            self.one_pass()
        self.final = True
        self.one_pass()
        return Reading(self.needs, sorted(self.unresolved), self.optional_variables)


def read_function(lesson: str, handler: str, functions_dir: Path = FUNCTIONS_DIR) -> Reading:
    """What the function whose code is ``<functions_dir>/<lesson>/`` (with ``shared`` beside
    it) and whose handler is ``<module>.<function>`` (Lambda's ``Handler``) needs."""
    module, _, function = handler.rpartition(".")
    return _Reader(lesson, functions_dir).read(module, function)


def powertools_modules(lesson: str, handler: str) -> set[str]:
    """The Powertools modules the function's code imports (its own folder and ``shared``)."""
    reader = _Reader(lesson)
    module = handler.rpartition(".")[0]
    reader.load(module)
    return {
        qualified
        for source in reader.sources.values()
        for qualified in source.imports.values()
        if qualified.startswith("aws_lambda_powertools")
    }


__all__ = [
    "Need",
    "Reading",
    "iam_action",
    "powertools_layer_methods",
    "powertools_modules",
    "read_function",
]
