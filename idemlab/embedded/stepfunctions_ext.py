"""Step Functions that execute, plus the three actions moto lacks, minus what AWS refuses.

- moto runs ASL only when `stepfunctions.execute_state_machine` is on; we turn it on.
- StartSyncExecution (EXPRESS only) runs the execution on the request thread and answers
  with its outcome, as AWS does.
- ValidateStateMachineDefinition and ListStateMachineVersions: the AWS provider for
  Terraform calls both when it plans or reads a state machine; unanswered, an apply
  retries for minutes.
- StartExecution without a name: AWS names the execution with a fresh UUID (StartExecution
  API reference, `name`); moto named it `None`, so a second unnamed start failed with
  ExecutionAlreadyExists, a false deduplication.
- Execution names AWS refuses are refused, on Standard and Express, StartExecution and
  StartSyncExecution: moto checks them only in the backend that does not execute (its
  executing backend has a TODO there), and every start comes here.
- Execution stays on: moto's `/moto-api/config` endpoint would let any client switch it
  off for the server's life (a reset does not switch it back), so a config that does is refused.
- Express executions as AWS keeps them: ARNs of the shape
  `arn:aws:states:<region>:<account>:express:<machine>:<name>:<id>`, no name
  deduplication ("Execution guarantees", Step Functions developer guide), nothing to
  read back: DescribeExecution, StopExecution and GetExecutionHistory answer InvalidArn,
  ListExecutions on an EXPRESS machine StateMachineTypeNotSupported, with the codes and
  messages AWS answered in the recordings of LocalStack's
  tests/aws/services/stepfunctions/v2/test_sfn_api_express.py (v4.14.0).
"""

from __future__ import annotations

import copy
import datetime
import json
import uuid

from moto.core.config import default_user_config
from moto.core.exceptions import AWSError
from moto.core.responses import ActionResult
from moto.stepfunctions.exceptions import InvalidArn, InvalidExecutionInput, InvalidName, NameTooLongException
from moto.stepfunctions.responses import StepFunctionResponse

from idemlab.embedded.patching import wrap


def _type_not_supported() -> AWSError:
    return AWSError("This operation is not supported by this type of state machine", "StateMachineTypeNotSupported")


def _is_express(state_machine) -> bool:
    # moto keeps the declared type in `type` (its `sm_type` always says STANDARD).
    return getattr(state_machine, "type", "STANDARD") == "EXPRESS"


# What a name must not contain, from the StartExecution and StartSyncExecution API reference
# (`name`; also botocore's stepfunctions model): white space, brackets < > { } [ ], wildcards
# ? *, the special characters " # % \ ^ | ~ ` $ & , ; : /, control characters (U+0000-001F,
# U+007F-009F), U+FFFE-FFFF and surrogates (U+D800-DFFF). Its length is 1-80.
_FORBIDDEN_IN_NAME = set(' <>{}[]?*"#%\\^|~`$&,;:/')


def _name_refused(name: str) -> bool:
    return any(
        char in _FORBIDDEN_IN_NAME
        or char.isspace()
        or ord(char) <= 0x1F
        or 0x7F <= ord(char) <= 0x9F
        or 0xD800 <= ord(char) <= 0xDFFF
        or ord(char) in (0xFFFE, 0xFFFF)
        for char in name
    )


def check_execution_name(name: str) -> None:
    """Refuse a name AWS refuses, with AWS's error (moto's classes and wording: InvalidName,
    or the ValidationException of a member longer than its model allows)."""
    if _name_refused(name):
        raise InvalidName(f"Invalid Name: '{name}'")
    if len(name) > 80:
        raise NameTooLongException(name)


def _start(self: StepFunctionResponse, sync: bool):
    """Start an execution (a UUID names it when the request does not); an Express one
    as AWS keeps it, and a sync one (Express only) run to its end on this thread."""
    backend = self.stepfunction_backend
    arn = self._get_param("stateMachineArn")
    state_machine = backend.describe_state_machine(arn)  # AWS's StateMachineDoesNotExist
    given = self._get_param("name")
    if given:
        check_execution_name(given)
    name = given or str(uuid.uuid4())
    execution_input = self._get_param("input", if_none="{}")
    if not _is_express(state_machine):
        if sync:
            raise _type_not_supported()
        return backend.start_execution(arn, name, execution_input)
    # Imported here: the ASL parser takes about a second to import, and the server
    # must be ready in under two.
    from moto.stepfunctions.parser.backend.execution import Execution, SyncExecution

    try:
        json.loads(execution_input)
    except ValueError as exc:
        raise InvalidExecutionInput(f"Invalid State Machine Execution Input: '{exc}'") from exc
    # The definition as it is now, for this execution (as the parser backend takes it).
    # Live executions hold threads and locks, so they are left out; the backend is shared.
    memo = {id(state_machine.executions): [], id(state_machine.backend): state_machine.backend}
    snapshot = copy.deepcopy(state_machine, memo)
    arn_prefix = f"arn:{backend.partition}:states:{backend.region_name}:{backend.account_id}:express"
    execution = (SyncExecution if sync else Execution)(
        name=name,
        exec_arn=f"{arn_prefix}:{state_machine.name}:{name}:{uuid.uuid4()}",
        input_data=execution_input,
        state_machine=snapshot,
        sm_type=snapshot.sm_type,
        role_arn=snapshot.roleArn,
        account_id=backend.account_id,
        region_name=backend.region_name,
        start_date=datetime.datetime.now(tz=datetime.timezone.utc),
        cloud_watch_logging_session=None,
        trace_header=None,
        activity_store={},
    )
    execution.start()  # not kept on the state machine: AWS answers no read of an Express execution
    return execution


def start_execution(self: StepFunctionResponse) -> ActionResult:
    return ActionResult(_start(self, sync=False).to_start_output())


def start_sync_execution(self: StepFunctionResponse) -> ActionResult:
    output = _start(self, sync=True).to_start_sync_execution_output()  # moto's parser renders it
    # billingDetails as AWS answered in LocalStack's recording (test_sfn_api_express.snapshot.json, v4.14.0).
    return ActionResult({**output, "billingDetails": {"billedMemoryUsedInMB": 64, "billedDurationInMilliseconds": 100}})


def _refuse_express_execution(action, self: StepFunctionResponse):
    if (self._get_param("executionArn") or "").split(":")[5:6] == ["express"]:
        raise InvalidArn("Invalid Arn: 'Resource type not valid in this context: express'")
    return action(self)


def _list_executions_standard_only(action, self: StepFunctionResponse):
    if _is_express(self.stepfunction_backend.describe_state_machine(self._get_param("stateMachineArn"))):
        raise _type_not_supported()
    return action(self)


def validate_state_machine_definition(self: StepFunctionResponse) -> ActionResult:
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    try:
        StepFunctionsParserBackend._validate_definition(self._get_param("definition"))
        diagnostics = []
    except Exception as exc:  # the parser's InvalidDefinition, whatever its wording
        diagnostics = [{"severity": "ERROR", "code": "SCHEMA_VALIDATION_FAILED", "message": str(exc)[:1000]}]
    return ActionResult({"result": "FAIL" if diagnostics else "OK", "diagnostics": diagnostics, "truncated": False})


def list_state_machine_versions(self: StepFunctionResponse) -> ActionResult:
    state_machine = self.stepfunction_backend.describe_state_machine(self._get_param("stateMachineArn"))
    versions = sorted(state_machine.versions.values(), key=lambda v: v.arn, reverse=True)
    listed = [{"stateMachineVersionArn": v.arn, "creationDate": v.creation_date} for v in versions]
    return ActionResult({"stateMachineVersions": listed})


def moto_config(request, full_url, headers):
    """moto's `/moto-api/config` endpoint, except that Step Functions execution stays on: the
    lessons' workflows depend on it, and nothing (not even a reset) would turn it back on."""
    from moto.moto_api._internal.models import moto_api_backend
    from moto.moto_api._internal.urls import response_instance

    answer = {"Content-Type": "application/json"}
    if request.method == "POST":
        try:
            config = response_instance._get_body(headers, request)
        except (ValueError, KeyError) as exc:
            config = exc
        if not isinstance(config, dict):
            return 400, answer, json.dumps({"message": f"the config must be a JSON object, got {config!r}"}).encode()
        wanted = config.get("stepfunctions", {"execute_state_machine": True})
        if not isinstance(wanted, dict) or wanted.get("execute_state_machine") is not True:
            refusal = (
                "the embedded backend always executes state machines: "
                "stepfunctions.execute_state_machine must stay true"
            )
            return 400, answer, json.dumps({"message": refusal}).encode()
        moto_api_backend.set_config(config)
    return 201, answer, json.dumps(moto_api_backend.get_config()).encode()


def install() -> None:
    from moto.moto_api._internal import urls

    default_user_config["stepfunctions"]["execute_state_machine"] = True
    urls.url_paths["{0}/moto-api/config"] = moto_config
    for action in ("describe_execution", "stop_execution", "get_execution_history"):
        wrap(StepFunctionResponse, action)(_refuse_express_execution)
    wrap(StepFunctionResponse, "list_executions")(_list_executions_standard_only)
    added = (start_execution, start_sync_execution, validate_state_machine_definition, list_state_machine_versions)
    for action in added:
        setattr(StepFunctionResponse, action.__name__, action)
