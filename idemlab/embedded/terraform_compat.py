"""What moto answers differently from AWS in ways that make Terraform plans non-empty.

Found by applying the lab's Terraform root to moto 5.2.5 with the AWS provider 5.100:

- SQS ``RedrivePolicy``: moto parses the JSON a client sends and serialises it again with
  ``json.dumps`` defaults (``", "`` and ``": "``). AWS returns it compact. The provider
  compares the string it holds with the one read back, so every plan after the first showed
  a "whitespace changes" update of ``redrive_policy``. We return it compact, as AWS does.
- S3 bucket policies: moto enforces statements with ``Principal: "*"`` but ignores their
  conditions, so the module's TLS-only policy (Deny when ``aws:SecureTransport`` is false)
  denied every request, and Terraform could not upload the function zips (403). The lab
  reaches its emulator over plain HTTP on loopback only; we evaluate ``aws:SecureTransport``
  as a TLS request would: such a Deny never applies, such an Allow always does.

- The first ``ValidateStateMachineDefinition`` (the provider calls it while planning each
  ``aws_sfn_state_machine``) imports moto's ASL parser: seconds on a loaded 2-core machine,
  while the whole plan waits. The server imports it in the background as it starts, so the
  plan finds it ready (``warm_up``).

Slow applies that are not moto's doing (the provider waits as long on AWS) are avoided in
the module itself (terraform/modules/idempotency_lab/; its comments say how): inline queue
policies, functions created from S3, no ``aws_s3_bucket_lifecycle_configuration``.
"""

from __future__ import annotations

import importlib
import json
import sys
import threading

from idemlab.embedded.patching import wrap

SECURE_TRANSPORT = "aws:SecureTransport"
# Imported by the server in the background as it starts (warm_up): what Terraform's plan needs first.
WARMED_MODULES = ("moto.stepfunctions.parser.models",)


def _compact_redrive_policy(original, queue) -> dict:
    attributes = original(queue)
    if queue.redrive_policy:
        attributes["RedrivePolicy"] = json.dumps(queue.redrive_policy, separators=(",", ":"))
    return attributes


def _as_if_over_tls(statement: dict) -> dict | None:
    """The statement with its aws:SecureTransport condition decided; None if it cannot match."""
    condition = statement.get("Condition")
    flags = condition["Bool"] if isinstance(condition, dict) and set(condition) == {"Bool"} else None
    if not isinstance(flags, dict) or set(flags) != {SECURE_TRANSPORT}:
        return statement
    values = flags[SECURE_TRANSPORT]
    if "true" not in [str(value).lower() for value in (values if isinstance(values, list) else [values])]:
        return None
    return {key: value for key, value in statement.items() if key != "Condition"}


def _permission_over_tls(bucket, action: str, resource: str):
    """FakeBucket.get_permission, with each aws:SecureTransport condition decided first."""
    from moto.iam.access_control import IAMPolicy, PermissionResult

    if bucket.policy is None:
        return PermissionResult.NEUTRAL
    document = json.loads(bucket.policy)  # bytes or text
    statements = document.get("Statement", [])
    statements = statements if isinstance(statements, list) else [statements]
    decided = [kept for kept in map(_as_if_over_tls, statements) if kept is not None]
    return IAMPolicy(json.dumps({**document, "Statement": decided})).is_action_permitted(action, resource)


def warm_up() -> None:
    """Import WARMED_MODULES now, so that the request that would import them does not wait.
    A failure here only costs the wait back: it is reported, and the request imports them itself."""
    for name in WARMED_MODULES:
        try:
            importlib.import_module(name)
        except Exception as exc:
            print(f"terraform_compat: could not import {name} ahead of time: {exc!r}", file=sys.stderr)


def install() -> None:
    """Patch moto in this process (the server at start, tests before their in-process moto); once is enough."""
    from moto.s3.models import FakeBucket
    from moto.sqs.models import Queue

    wrap(Queue, "attributes")(_compact_redrive_policy)
    FakeBucket.get_permission = _permission_over_tls
    threading.Thread(target=warm_up, name="terraform-warm-up", daemon=True).start()
