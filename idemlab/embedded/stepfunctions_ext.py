"""Step Functions that execute, plus the three actions moto lacks.

- moto runs ASL only when `stepfunctions.execute_state_machine` is on; we turn it on.
- StartSyncExecution (EXPRESS only): runs the execution on the request thread and
  answers with its outcome, as AWS does.
- ValidateStateMachineDefinition and ListStateMachineVersions: the AWS provider for
  Terraform calls both when it plans or reads a state machine; unanswered, an apply
  retries for minutes.
"""

from __future__ import annotations

import copy
import datetime
import json
import uuid

from moto.core.config import default_user_config
from moto.core.exceptions import AWSError
from moto.core.responses import ActionResult
from moto.stepfunctions.responses import StepFunctionResponse


class StateMachineTypeNotSupported(AWSError):
    TYPE = "StateMachineTypeNotSupported"
    STATUS = 400


def start_sync_execution(self: StepFunctionResponse) -> ActionResult:
    # Imported here: the ASL parser takes about a second to import, and the server
    # must be ready in under two.
    from moto.stepfunctions.parser.backend.execution import SyncExecution

    arn = self._get_param("stateMachineArn")
    name = self._get_param("name") or uuid.uuid4().hex
    execution_input = self._get_param("input", if_none="{}")
    backend = self.stepfunction_backend
    state_machine = backend.describe_state_machine(arn)  # AWS's StateMachineDoesNotExist
    # moto keeps the declared type in `type` (its `sm_type` always says STANDARD).
    if getattr(state_machine, "type", "STANDARD") != "EXPRESS":
        raise StateMachineTypeNotSupported("This operation is not supported by this type of state machine")
    try:
        json.loads(execution_input)
    except ValueError as exc:
        from moto.stepfunctions.exceptions import InvalidExecutionInput

        raise InvalidExecutionInput(f"Invalid State Machine Execution Input: '{exc}'") from exc
    # A snapshot of the definition, as the parser backend takes for StartExecution
    # (sharing the backend and leaving out live executions, which hold threads).
    snapshot = copy.deepcopy(
        state_machine,
        {id(state_machine.executions): [], id(state_machine.backend): state_machine.backend},
    )
    execution_arn = (
        f"arn:{backend.partition}:states:{backend.region_name}:{backend.account_id}"
        f":express:{state_machine.name}:{name}:{uuid.uuid4()}"
    )
    execution = SyncExecution(
        name=name,
        sm_type=snapshot.sm_type,
        role_arn=snapshot.roleArn,
        exec_arn=execution_arn,
        account_id=backend.account_id,
        region_name=backend.region_name,
        state_machine=snapshot,
        start_date=datetime.datetime.now(tz=datetime.timezone.utc),
        cloud_watch_logging_session=None,
        input_data=execution_input,
        trace_header=None,
        activity_store={},
    )
    execution.start()  # the sync worker runs the program to its end on this thread
    response = {
        "executionArn": execution_arn,
        "stateMachineArn": arn,
        "name": name,
        "startDate": execution.start_date,
        "stopDate": execution.stop_date,
        "status": execution.sync_execution_status.value,
        "input": execution_input,
        "inputDetails": {"included": True},
        "billingDetails": {"billedMemoryUsedInMB": 64, "billedDurationInMilliseconds": 100},
    }
    if execution.output is not None:
        response["output"] = json.dumps(execution.output, separators=(",", ":"))
        response["outputDetails"] = {"included": True}
    if execution.error is not None:
        response["error"] = execution.error
    if execution.cause is not None:
        response["cause"] = execution.cause
    return ActionResult(response)


def validate_state_machine_definition(self: StepFunctionResponse) -> ActionResult:
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    definition = self._get_param("definition")
    try:
        StepFunctionsParserBackend._validate_definition(definition)
    except Exception as exc:  # the parser's InvalidDefinition, whatever its wording
        diagnostic = {"severity": "ERROR", "code": "SCHEMA_VALIDATION_FAILED", "message": str(exc)[:1000]}
        return ActionResult({"result": "FAIL", "diagnostics": [diagnostic], "truncated": False})
    return ActionResult({"result": "OK", "diagnostics": [], "truncated": False})


def list_state_machine_versions(self: StepFunctionResponse) -> ActionResult:
    state_machine = self.stepfunction_backend.describe_state_machine(self._get_param("stateMachineArn"))
    versions = [
        {"stateMachineVersionArn": version.arn, "creationDate": version.creation_date}
        for version in sorted(state_machine.versions.values(), key=lambda v: v.arn, reverse=True)
    ]
    return ActionResult({"stateMachineVersions": versions})


def install() -> None:
    default_user_config["stepfunctions"]["execute_state_machine"] = True
    StepFunctionResponse.start_sync_execution = start_sync_execution
    StepFunctionResponse.validate_state_machine_definition = validate_state_machine_definition
    StepFunctionResponse.list_state_machine_versions = list_state_machine_versions
