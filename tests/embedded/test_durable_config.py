"""The embedded backend keeps a function's DurableConfig, from CreateFunction and from a
CloudFormation stack's AWS::Lambda::Function (moto drops it from both), and describes it
back; durability is set only when a function is created (Lambda API reference,
CreateFunction: DurableConfig; CloudFormation template reference, AWS::Lambda::Function)."""

from __future__ import annotations

import json
import uuid

from idemlab import clients

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
