"""The moto patches Terraform needs, against a real moto server in this process."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.exceptions import ClientError

from idemlab.embedded import terraform_compat
from idemlab.embedded.server import free_port


@pytest.fixture(scope="module")
def moto_url():
    from moto.server import ThreadedMotoServer

    terraform_compat.install()
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


def _client(service: str, url: str):
    return boto3.client(
        service, endpoint_url=url, region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test"
    )


def test_install_twice_patches_once():
    terraform_compat.install()
    from moto.sqs.models import Queue

    patched = Queue.attributes.fget
    terraform_compat.install()
    assert Queue.attributes.fget is patched


def test_redrive_policy_reads_back_as_sent(moto_url):
    sqs = _client("sqs", moto_url)
    dlq = sqs.create_queue(QueueName="compat-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    # What Terraform's jsonencode() sends: compact, keys sorted.
    sent = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 3}, separators=(",", ":"))
    work = sqs.create_queue(QueueName="compat-work", Attributes={"RedrivePolicy": sent})["QueueUrl"]
    read = sqs.get_queue_attributes(QueueUrl=work, AttributeNames=["All"])["Attributes"]["RedrivePolicy"]
    assert read == sent


def test_redrive_still_moves_messages_to_the_dead_letter_queue(moto_url):
    sqs = _client("sqs", moto_url)
    dlq = sqs.create_queue(QueueName="compat-dlq2")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})
    work = sqs.create_queue(QueueName="compat-work2", Attributes={"RedrivePolicy": policy, "VisibilityTimeout": "0"})[
        "QueueUrl"
    ]
    sqs.send_message(QueueUrl=work, MessageBody="poison")
    for _ in range(3):
        sqs.receive_message(QueueUrl=work, WaitTimeSeconds=0)
    moved = sqs.receive_message(QueueUrl=dlq, WaitTimeSeconds=0).get("Messages", [])
    assert [m["Body"] for m in moved] == ["poison"]


def _tls_only(bucket: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "DenyPlainHttp",
                    "Effect": "Deny",
                    "Principal": "*",
                    "Action": "s3:*",
                    "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                }
            ],
        }
    )


def test_a_tls_only_bucket_policy_lets_loopback_requests_through(moto_url):
    s3 = _client("s3", moto_url)
    s3.create_bucket(Bucket="compat-tls-only")
    s3.put_bucket_policy(Bucket="compat-tls-only", Policy=_tls_only("compat-tls-only"))
    s3.put_object(Bucket="compat-tls-only", Key="a.zip", Body=b"zip")
    assert s3.get_object(Bucket="compat-tls-only", Key="a.zip")["Body"].read() == b"zip"


def test_an_unconditional_deny_is_still_enforced(moto_url):
    s3 = _client("s3", moto_url)
    s3.create_bucket(Bucket="compat-deny")
    deny = json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Deny", "Principal": "*", "Action": "s3:PutObject", "Resource": "arn:aws:s3:::compat-deny/*"}
            ],
        }
    )
    s3.put_bucket_policy(Bucket="compat-deny", Policy=deny)
    with pytest.raises(ClientError) as refused:
        s3.put_object(Bucket="compat-deny", Key="a", Body=b"x")
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


# Run in a fresh interpreter: this test process may have imported the parser already.
WARM_UP_PROBE = """
import sys, time
from idemlab.embedded import terraform_compat
wanted = ["moto.stepfunctions.parser.models"]  # what the first ValidateStateMachineDefinition imports
assert not [name for name in wanted if name in sys.modules], "imported before install()"
terraform_compat.install()
deadline = time.monotonic() + 90
while [name for name in wanted if name not in sys.modules] and time.monotonic() < deadline:
    time.sleep(0.05)
missing = [name for name in wanted if name not in sys.modules]
print("missing:", missing)
sys.exit(1 if missing else 0)
"""


def test_install_imports_the_asl_parser_in_the_background_before_the_first_validation():
    """Terraform's plan calls ValidateStateMachineDefinition first thing; the server that
    installed the patches has the parser imported without that request asking for it."""
    import subprocess
    import sys

    probe = subprocess.run([sys.executable, "-c", WARM_UP_PROBE], capture_output=True, text=True, timeout=300)
    assert probe.returncode == 0, probe.stdout + probe.stderr
