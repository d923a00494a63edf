"""The embedded backend keeps a function's DurableConfig, from CreateFunction and from a
CloudFormation stack's AWS::Lambda::Function (moto drops it from both), and describes it
back; durability is set only when a function is created (Lambda API reference,
CreateFunction: DurableConfig; CloudFormation template reference, AWS::Lambda::Function)."""

from __future__ import annotations

import io
import json
import uuid
import zipfile

import boto3
from botocore.config import Config

from idemlab import clients
from idemlab.embedded.server import EmbeddedBackend

DURABLE_CONFIG = {"ExecutionTimeout": 300, "RetentionPeriodInDays": 1}


def test_a_function_created_by_a_stack_keeps_its_durable_config(backend, lambda_role):
    name = f"durable-cfn-{uuid.uuid4().hex[:8]}"
    template = {
        "Resources": {
            "Function": {
                "Type": "AWS::Lambda::Function",
                "Properties": {
                    "FunctionName": name,
                    "Runtime": "python3.12",
                    "Handler": "index.handler",
                    "Role": lambda_role,
                    "Code": {"ZipFile": "def handler(event, context):\n    return 1\n"},
                    "DurableConfig": DURABLE_CONFIG,
                },
            }
        },
        "Outputs": {"Name": {"Value": {"Ref": "Function"}}},
    }
    cloudformation = clients.client("cloudformation")
    cloudformation.create_stack(StackName=name, TemplateBody=json.dumps(template))
    stack = cloudformation.describe_stacks(StackName=name)["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    assert stack["Outputs"] == [{"OutputKey": "Name", "OutputValue": name}]
    configuration = clients.client("lambda").get_function_configuration(FunctionName=name)
    assert configuration["DurableConfig"] == DURABLE_CONFIG


def test_a_function_created_without_durable_config_describes_none(make_function):
    name = make_function("def handler(event, context):\n    return 1\n")
    assert "DurableConfig" not in clients.client("lambda").get_function_configuration(FunctionName=name)


# What a learner's shell has when `make up` starts the backend: no AWS keys at all. botocore
# takes an empty variable for an unset one.
NO_KEYS = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": ""}
DURABLE_HANDLER = """
from aws_durable_execution_sdk_python import DurableContext, durable_execution


@durable_execution
def handler(event, context: DurableContext):
    return context.step(lambda step: event["n"] + 1, name="add_one")
"""


def zip_source(source: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("app.py", source)
    return buffer.getvalue()


def test_a_backend_started_without_aws_keys_still_runs_a_durable_function():
    """AWS's runner invokes the handler through boto3 in the backend's own process, which
    must not depend on the keys of the shell that started it."""
    with EmbeddedBackend(environment=NO_KEYS) as server:
        session = boto3.session.Session(aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1")
        lambda_ = session.client("lambda", endpoint_url=server.url, config=Config(read_timeout=300))
        trust = {
            "Statement": [
                {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
            ]
        }
        role = session.client("iam", endpoint_url=server.url).create_role(
            RoleName="durable", AssumeRolePolicyDocument=json.dumps(trust)
        )["Role"]["Arn"]
        lambda_.create_function(
            FunctionName="add-one",
            Runtime="python3.12",
            Role=role,
            Handler="app.handler",
            Code={"ZipFile": zip_source(DURABLE_HANDLER)},
            Timeout=30,
            DurableConfig=DURABLE_CONFIG,
        )
        answer = lambda_.invoke(FunctionName="add-one", Payload=json.dumps({"n": 41}).encode())
        assert "FunctionError" not in answer, answer["Payload"].read()
        assert json.loads(answer["Payload"].read()) == 42
