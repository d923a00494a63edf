"""Each function's role allows exactly what its code calls: none missing, none extra.

What a function needs is read from its code (``support.boto3_calls``: the boto3 calls its
handler can reach, Powertools' persistence layer read from the installed package), plus
what Lambda itself does as the function's role because of how the function is configured:
its logs, its traces, its on-failure destination and the queues its event source mappings
poll. What the role allows is read from the deployed stack through IAM, so the test judges
the policies Terraform actually wrote. The embedded backend enforces no IAM: without this
test a missing permission would show only on AWS, and an extra one never.

Resources are compared by what they are in the stack (``("table", "ledger")``), not by
ARN. A Query statement names the table and its indexes (one needs the index's ARN to query
an index); any other action on an index ARN is extra. Each workflow's role is held the same
way to the tasks of its deployed definition.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from idemlab import clients, module_spec
from support import boto3_calls

pytestmark = pytest.mark.stack

# Actions whose statements AWS accepts only with Resource "*": the Service Authorization
# Reference lists no resource type for them (an action without one "must specify all
# resources ("*")").
REQUIRED_STAR = {
    "xray:PutTraceSegments": "X-Ray defines no resource type for it (list_awsx-ray.html); active tracing sends segments",
    "xray:PutTelemetryRecords": "X-Ray defines no resource type for it (list_awsx-ray.html); active tracing sends them",
    "cloudwatch:PutMetricData": (
        "CloudWatch defines no resource type for it (list_amazoncloudwatch.html); "
        "the statement is pinned to the function's namespace by the cloudwatch:namespace condition"
    ),
}

POWERTOOLS_PERSISTENCE = Path("utilities/idempotency/persistence/dynamodb.py")


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value]


class Stack:
    """The deployed stack's resources by what they are: ``("table", "ledger")`` for an ARN,
    a queue URL or a bucket name."""

    def __init__(self, lab: dict):
        self.lab = lab
        self.arns = {arn: ("function", key) for key, arn in lab["function_arns"].items()}
        self.arns |= {arn: ("workflow", key) for key, arn in lab["state_machines"].items()}
        self.arns |= {arn: ("queue", key) for key, arn in lab["queue_arns"].items()}
        self.arns[lab["scheduler_role_arn"]] = ("role", "scheduler")
        self.arns["*"] = ("*",)
        self.values = {url: ("queue", key) for key, url in lab["queues"].items()}
        self.values |= {name: ("bucket", key) for key, name in lab["buckets"].items()}
        self.values[lab["schedule_group"]] = ("schedules", lab["schedule_group"])
        self.tables = {name: key for key, name in lab["tables"].items()}
        self.buckets = {name: key for key, name in lab["buckets"].items()}

    def of_arn(self, arn: str, action: str) -> tuple:
        if arn in self.arns:
            return self.arns[arn]
        table = re.fullmatch(r"arn:[^:]+:dynamodb:[^:]*:[^:]*:table/([^/]+)(/index/(.+))?", arn)
        if table and table.group(1) in self.tables:
            key = self.tables[table.group(1)]
            if table.group(2) is None or action in ("dynamodb:Query", "dynamodb:Scan"):
                return ("table", key)
            return ("index", key, table.group(3))
        bucket = re.fullmatch(r"arn:[^:]+:s3:::([^/]+)(/\*)?", arn)
        if bucket and bucket.group(1) in self.buckets:
            return ("objects" if bucket.group(2) else "bucket", self.buckets[bucket.group(1)])
        schedules = re.fullmatch(r"arn:[^:]+:scheduler:[^:]*:[^:]*:schedule/([^/]+)/\*", arn)
        if schedules and schedules.group(1) == self.lab["schedule_group"]:
            return ("schedules", schedules.group(1))
        log_group = re.fullmatch(r"arn:[^:]+:logs:[^:]*:[^:]*:log-group:(.+):\*", arn)
        if log_group:
            return ("log_group", log_group.group(1))
        return ("unknown", arn)

    def of_value(self, value: str, action: str) -> tuple:
        """What an environment variable's value names, as the action acts on it."""
        if value.startswith("arn:"):
            return self.of_arn(value, action)
        found = self.values.get(value, ("unknown", value))
        if found[0] == "bucket" and action != "s3:ListBucket":
            return ("objects", found[1])  # object actions act on <bucket>/*
        return found


def _allowed(role_name: str, stack: Stack) -> tuple[set[tuple], list[dict]]:
    """(every (action, resource) the role's policies allow, the statements on Resource "*")."""
    iam = clients.client("iam")
    attached = iam.list_attached_role_policies(RoleName=role_name)["AttachedPolicies"]
    assert not attached, f"{role_name} has managed policies, which this test does not read: {attached}"
    allowed, starred = set(), []
    for name in iam.list_role_policies(RoleName=role_name)["PolicyNames"]:
        document = iam.get_role_policy(RoleName=role_name, PolicyName=name)["PolicyDocument"]
        document = json.loads(document) if isinstance(document, str) else document
        for statement in _as_list(document["Statement"]):
            assert statement["Effect"] == "Allow", f"{role_name}: a Deny statement this test does not read"
            resources = _as_list(statement["Resource"])
            if "*" in resources:
                starred.append(statement)
            for action in _as_list(statement["Action"]):
                allowed |= {(action, stack.of_arn(arn, action)) for arn in resources}
    return allowed, starred


def _configured(function_name: str, configuration: dict, stack: Stack) -> set[tuple]:
    """What Lambda does as the function's role because of its configuration, not its code."""
    lambda_client = clients.client("lambda")
    log_group = configuration.get("LoggingConfig", {}).get("LogGroup") or f"/aws/lambda/{function_name}"
    # The runtime writes the function's logs (Lambda developer guide, monitoring-cloudwatchlogs.html).
    needed = {(action, ("log_group", log_group)) for action in ("logs:CreateLogStream", "logs:PutLogEvents")}
    if configuration.get("TracingConfig", {}).get("Mode") == "Active":
        # Active tracing sends segments as the role (Lambda developer guide, services-xray.html).
        needed |= {(action, ("*",)) for action in ("xray:PutTraceSegments", "xray:PutTelemetryRecords")}
    invoke_config = lambda_client.get_function_event_invoke_config(FunctionName=function_name)
    destination = invoke_config.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination")
    if destination:
        # An on-failure destination receives the record as the role (invocation-async-retain-records.html).
        needed.add(("sqs:SendMessage", stack.of_arn(destination, "sqs:SendMessage")))
    # Matched by ARN: moto filters FunctionName against what the mapping was created with
    # (Terraform passes the ARN), so asking by name finds none there.
    mappings = lambda_client.list_event_source_mappings()["EventSourceMappings"]
    for mapping in (m for m in mappings if m["FunctionArn"] == configuration["FunctionArn"]):
        # The mapping polls as the role (Lambda developer guide, with-sqs.html, execution role permissions).
        for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"):
            needed.add((action, stack.of_arn(mapping["EventSourceArn"], action)))
    return needed


def _from_code(key: str, configuration: dict, stack: Stack) -> tuple[set[tuple], list[str]]:
    """(what the function's code calls, as (action, resource)), (calls it could not place)."""
    lesson = module_spec.default("functions")[key]["lesson"]
    reading = boto3_calls.read_function(lesson, configuration["Handler"])
    environment = configuration.get("Environment", {}).get("Variables", {})
    needed, problems = set(), [f"cannot tell what this call acts on: {call}" for call in reading.unresolved]
    for need in reading.needs:
        kind = need.resource[0]
        if kind == "table":
            variable = f"{need.resource[1].upper()}_TABLE"
            if variable in reading.optional_variables and variable not in environment:
                continue  # the code reads it with settings.optional: without it, no call is made
            needed.add((need.action, need.resource))
        elif kind == "function":
            needed.add((need.action, need.resource))
        elif kind == "env":
            value = environment.get(need.resource[1])
            if value is None:
                problems.append(f"{need.where}: {need.action} on ${need.resource[1]}, which is not set")
                continue
            needed.add((need.action, stack.of_value(value, need.action)))
        elif kind == "*":
            needed.add((need.action, ("*",)))
        else:
            problems.append(f"{need.where}: {need.action} on {need.resource}: which resource is not known")
    return needed, problems


@pytest.fixture(scope="module")
def compared(stack) -> dict[str, dict]:
    """Per function: what its code and configuration need, what its role allows, its statements on "*"."""
    lambda_client = clients.client("lambda")
    resources = Stack(stack)
    found = {}
    for key, name in sorted(stack["functions"].items()):
        configuration = lambda_client.get_function_configuration(FunctionName=name)
        from_code, problems = _from_code(key, configuration, resources)
        allowed, starred = _allowed(configuration["Role"].rsplit("/", 1)[1], resources)
        found[key] = {
            "needed": from_code | _configured(name, configuration, resources),
            "allowed": allowed,
            "starred": starred,
            "problems": problems,
            "environment": configuration.get("Environment", {}).get("Variables", {}),
            "configuration": configuration,
        }
    return found


def _listing(by_function: dict[str, set]) -> str:
    return "\n".join(
        f"  {key}: " + ", ".join(f"{action} on {'/'.join(map(str, resource))}" for action, resource in sorted(pairs))
        for key, pairs in sorted(by_function.items())
        if pairs
    )


def test_the_code_reading_places_every_call(compared):
    problems = {key: found["problems"] for key, found in compared.items() if found["problems"]}
    assert not problems, f"calls the reading of the code could not place: {problems}"


def test_every_call_a_functions_code_makes_is_allowed_by_its_role(compared):
    missing = {key: found["needed"] - found["allowed"] for key, found in compared.items()}
    assert not any(missing.values()), "roles missing what their function calls:\n" + _listing(missing)


def test_a_functions_role_allows_nothing_its_code_does_not_call(compared):
    extra = {key: found["allowed"] - found["needed"] for key, found in compared.items()}
    assert not any(extra.values()), "roles allowing what their function never calls:\n" + _listing(extra)


def test_resource_star_only_for_actions_aws_defines_no_resource_for(compared):
    wrong = []
    for key, found in compared.items():
        for statement in found["starred"]:
            others = sorted(set(_as_list(statement["Action"])) - set(REQUIRED_STAR))
            if others:
                wrong.append(f"{key}: {others} on Resource * (AWS accepts named resources for them)")
            if "cloudwatch:PutMetricData" in _as_list(statement["Action"]):
                namespace = statement.get("Condition", {}).get("StringEquals", {}).get("cloudwatch:namespace")
                if namespace != found["environment"].get("METRIC_NAMESPACE"):
                    wrong.append(f"{key}: PutMetricData not pinned to its METRIC_NAMESPACE (condition {namespace!r})")
    assert not wrong, "\n".join(wrong)


def test_powertools_reaches_aws_only_through_its_dynamodb_persistence_layer():
    """The reading counts Powertools' persistence layer and nothing else of Powertools: every
    other Powertools module the functions import must import no boto3."""
    import aws_lambda_powertools

    root = Path(aws_lambda_powertools.__file__).parent
    imported = set()
    for key, spec in module_spec.default("functions").items():
        handler = spec.get("handler") or f"{key}.handler"
        imported |= boto3_calls.powertools_modules(spec["lesson"], handler)
    assert imported, "no function imports Powertools: the reading of its layer is not exercised"
    calling_aws = set()
    for name in imported:
        parts = name.split(".")[1:]
        while parts and not (root.joinpath(*parts).is_dir() or root.joinpath(*parts).with_suffix(".py").is_file()):
            parts.pop()  # a name imported from a module: its module
        path = root.joinpath(*parts)
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path.with_suffix(".py")]
        for file in files:
            tree = ast.parse(file.read_text())
            for node in ast.walk(tree):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                if any(n == "boto3" or n.startswith("boto3.") for n in names):
                    calling_aws.add(file.relative_to(root))
    assert calling_aws == {POWERTOOLS_PERSISTENCE}, (
        f"Powertools modules the functions import that use boto3, besides the persistence layer: "
        f"{sorted(calling_aws - {POWERTOOLS_PERSISTENCE})}"
    )
    layer = {boto3_calls.iam_action("dynamodb", method) for method in boto3_calls.powertools_layer_methods()}
    level = set(module_spec.local_value("table_actions")["idempotency"])
    assert level == layer, f"the `idempotency` level allows {sorted(level)}; Powertools' layer calls {sorted(layer)}"


def test_the_keyed_checkout_needs_nothing_beyond_the_role_it_borrows(stack, compared):
    """Lesson 7 creates its keyed checkouts itself, with the role of the stack's
    checkout_powertools (idemlab.lessons.keys): their code must fit that role."""
    from idemlab.lessons import keys

    borrowed = compared[keys.TEMPLATE_FUNCTION]
    configuration = {**borrowed["configuration"], "Handler": keys.HANDLER}
    needed, problems = _from_code(keys.TEMPLATE_FUNCTION, configuration, Stack(stack))
    assert not problems, problems
    assert needed, "the reading found no call in the keyed checkout"
    missing = needed - borrowed["allowed"]
    assert not missing, (
        f"{keys.HANDLER} calls what the role of {keys.TEMPLATE_FUNCTION} does not allow: {sorted(missing)}"
    )


# What a state machine does as its role besides its tasks, each because of how it is
# configured: tracing (Step Functions developer guide, xray-iam.html) and logging, whose log
# delivery calls take Resource "*" (cw-logs.html).
WORKFLOW_TRACING = (
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "xray:GetSamplingRules",
    "xray:GetSamplingTargets",
)
WORKFLOW_LOGGING = (
    "logs:CreateLogDelivery",
    "logs:GetLogDelivery",
    "logs:UpdateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:DescribeResourcePolicies",
    "logs:DescribeLogGroups",
)
# A DynamoDB task of Step Functions' optimized integration, and the action it calls
# (Step Functions developer guide, connect-ddb.html and its IAM policies).
DYNAMODB_TASKS = {
    f"arn:aws:states:::dynamodb:{name}": f"dynamodb:{name[0].upper()}{name[1:]}"
    for name in (
        "getItem",
        "putItem",
        "updateItem",
        "deleteItem",
    )
}


def _tasks(states: dict):
    """Every Task state of a definition, inside Parallel branches and Map processors too."""
    for state in states.values():
        if state.get("Type") == "Task":
            yield state
        for branch in state.get("Branches", []):
            yield from _tasks(branch["States"])
        processor = state.get("ItemProcessor") or state.get("Iterator")
        if processor:
            yield from _tasks(processor["States"])


def _workflow_needs(description: dict, stack: Stack) -> set[tuple]:
    needed = set()
    for task in _tasks(json.loads(description["definition"])["States"]):
        resource = task["Resource"]
        if resource in DYNAMODB_TASKS:
            table = task["Parameters"]["TableName"]
            needed.add((DYNAMODB_TASKS[resource], ("table", stack.tables.get(table, table))))
        elif ":lambda:" in resource and ":function:" in resource:
            needed.add(("lambda:InvokeFunction", stack.of_arn(resource, "lambda:InvokeFunction")))
        else:
            needed.add(("unknown task", ("unknown", resource)))
    if description.get("tracingConfiguration", {}).get("enabled"):
        needed |= {(action, ("*",)) for action in WORKFLOW_TRACING}
    if description.get("loggingConfiguration", {}).get("level", "OFF") != "OFF":
        needed |= {(action, ("*",)) for action in WORKFLOW_LOGGING}
    return needed


def test_every_workflow_role_allows_exactly_what_its_definition_calls(stack):
    states = clients.client("stepfunctions")
    resources = Stack(stack)
    wrong = {}
    for key, arn in sorted(stack["state_machines"].items()):
        description = states.describe_state_machine(stateMachineArn=arn)
        needed = _workflow_needs(description, resources)
        allowed, _ = _allowed(description["roleArn"].rsplit("/", 1)[1], resources)
        if needed != allowed:
            wrong[key] = f"missing {sorted(needed - allowed)}, extra {sorted(allowed - needed)}"
    assert not wrong, wrong
