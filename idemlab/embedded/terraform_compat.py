"""What moto answers differently from AWS in ways that make Terraform plans non-empty.

``install()`` patches moto's classes in this process; it is idempotent, and the embedded
server calls it at start (tests that run a ThreadedMotoServer in-process call it too).

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

Slow applies that are NOT moto's doing (the provider waits the same on AWS), and how the
module avoids them instead (see terraform/modules/idempotency_lab/):

- ``aws_sqs_queue``: after CreateQueue the provider polls GetQueueAttributes until six
  reads in a row match, at least 5 s apart: about 25 s per queue, whatever the server
  answers. Queues are created in parallel, and queue policies are set inline rather than
  by ``aws_sqs_queue_policy`` (which waits the same way again).
- ``aws_lambda_function`` with ``filename``: the provider holds one global lock while it
  reads the zip, creates the function and waits 5 s for it to become Active, so functions
  are created one at a time (18 functions: 95 s). The module uploads the zips to S3 and
  creates functions from ``s3_bucket``/``s3_key``, in parallel.
- ``aws_s3_bucket_lifecycle_configuration``: sleeps 5 s per read until two reads agree,
  on create and on every refresh (55 s per apply). The module has none.
"""

from __future__ import annotations

import json
import threading

_lock = threading.Lock()
_installed = False


def _compact(document: object) -> str:
    return json.dumps(document, separators=(",", ":"))


def _patch_sqs_redrive_policy() -> None:
    from moto.sqs.models import Queue

    moto_attributes = Queue.attributes.fget

    def attributes(self: Queue) -> dict:
        result = moto_attributes(self)
        if self.redrive_policy:
            result["RedrivePolicy"] = _compact(self.redrive_policy)
        return result

    Queue.attributes = property(attributes)


SECURE_TRANSPORT = "aws:SecureTransport"


def _as_if_over_tls(statement: dict) -> dict | None:
    """The statement with its aws:SecureTransport condition decided; None if it cannot match."""
    condition = statement.get("Condition")
    if not isinstance(condition, dict) or set(condition) != {"Bool"}:
        return statement
    flags = condition["Bool"]
    if not isinstance(flags, dict) or set(flags) != {SECURE_TRANSPORT}:
        return statement
    values = flags[SECURE_TRANSPORT] if isinstance(flags[SECURE_TRANSPORT], list) else [flags[SECURE_TRANSPORT]]
    if "true" not in [str(v).lower() for v in values]:
        return None
    return {key: value for key, value in statement.items() if key != "Condition"}


def _patch_s3_secure_transport() -> None:
    from moto.iam.access_control import IAMPolicy, PermissionResult
    from moto.s3.models import FakeBucket

    def get_permission(self: FakeBucket, action: str, resource: str):
        if self.policy is None:
            return PermissionResult.NEUTRAL
        document = json.loads(self.policy.decode() if isinstance(self.policy, bytes) else self.policy)
        statements = document.get("Statement", [])
        statements = statements if isinstance(statements, list) else [statements]
        decided = [kept for kept in (_as_if_over_tls(s) for s in statements) if kept is not None]
        if not decided:
            return PermissionResult.NEUTRAL
        return IAMPolicy(json.dumps({**document, "Statement": decided})).is_action_permitted(action, resource)

    FakeBucket.get_permission = get_permission


def install() -> None:
    """Patch moto in this process; calling it again does nothing."""
    global _installed
    with _lock:
        if _installed:
            return
        _patch_sqs_redrive_policy()
        _patch_s3_secure_transport()
        _installed = True


def installed() -> bool:
    return _installed
