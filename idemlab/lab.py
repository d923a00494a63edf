"""The first cell of every notebook: which backend, which endpoint, what is deployed.

from idemlab import lab
stack = lab.connect()
"""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from idemlab import clients, settings, stack


def missing_resources(outputs: dict) -> str:
    """Which of the stack's tables and functions the backend no longer has ("" when none):
    the outputs file outlives an emulator's restart, the resources it names do not."""
    try:
        tables = set(clients.client("dynamodb").get_paginator("list_tables").paginate().search("TableNames[]"))
        functions = set(
            clients.client("lambda").get_paginator("list_functions").paginate().search("Functions[].FunctionName")
        )
    except (BotoCoreError, ClientError) as exc:
        raise stack.StackError(
            f"the backend at {clients.endpoint() or 'AWS'} does not answer ({exc}): run `make up`"
        ) from exc
    gone = [f"table {name}" for name in sorted(set((outputs.get("tables") or {}).values()) - tables)]
    gone += [f"function {name}" for name in sorted(set((outputs.get("functions") or {}).values()) - functions)]
    return ", ".join(gone[:3]) + (f" and {len(gone) - 3} more" if len(gone) > 3 else "")


def connect(prefix: str | None = None) -> dict:
    """Print where the lab runs and what is deployed there; return the `lab` outputs.

    Whose stack: ``prefix``, else the participant (settings.participant(): $PARTICIPANT, else
    what `make deploy PARTICIPANT=...` remembered, else "lab"), so no notebook cell names one.
    """
    prefix = settings.participant() if prefix is None else settings.check_prefix(prefix)
    chosen = settings.backend()
    # On an emulator, dummy keys and the region in this process's environment from here on:
    # the notebook's own boto3 clients and the Lambda code it runs in process need them.
    where = clients.use_emulator_environment() or f"AWS {settings.region()}"
    try:
        outputs = stack.outputs(prefix=prefix, backend=chosen)
    except stack.StackError as exc:  # the message names the file it looked for
        raise stack.StackError(f"no '{prefix}' stack on {chosen} ({where}): run `make up deploy` ({exc})") from exc
    missing = missing_resources(outputs)
    if missing and chosen != "aws":  # an emulator keeps its state in memory: a restart empties it
        raise stack.StackError(
            f"the backend restarted: run `make deploy` (the '{prefix}' stack's {missing} "
            f"are gone from {chosen} at {where})"
        )
    if missing:
        raise stack.StackError(f"the '{prefix}' stack's {missing} are gone from {where}: run `make deploy`")
    print(f"Backend: {chosen} at {where}, region {settings.region()}, participant '{prefix}'")
    for kind in ("tables", "functions", "state_machines", "queues", "buckets"):
        if names := outputs.get(kind):
            print(f"  {kind:15} {len(names):2}: {', '.join(sorted(names))}")
    return outputs
