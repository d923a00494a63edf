"""Lambda's package and payload limits on the embedded backend: what AWS refuses is
refused, with AWS's error, and changes nothing.

Package checks: Lambda quotas (250 MB unzipped) and the AWS-validated recordings of
LocalStack's test_lambda_api.py (v4.14.0). Payload limits: the Invoke API reference (6 MB
synchronous, 1 MB asynchronous).
"""

import io
import json
import uuid
import zipfile

import pytest

from idemlab import clients
from tests.conftest import zip_source

UNZIP_MESSAGE = "Could not unzip uploaded file. Please check your file, then try to upload again."
UNZIPPED_LIMIT = 262144000
HANDLER = "def handler(event, context):\n    return {'version': VERSION, 'size': len(event.get('pad', ''))}\n"


def lam():
    # One attempt: a refusal must come back as itself, not be retried three times.
    return clients.client("lambda", retries={"total_max_attempts": 1}, read_timeout=120)


def corrupt_zip() -> bytes:
    """A zip whose directory reads but whose member does not: its stored bytes are altered."""
    good = bytearray(zip_source("def handler(event, context):\n    return 'x' * 100\n"))
    start = good.index(b"def handler") if b"def handler" in good else 40
    good[start : start + 4] = b"XXXX"
    return bytes(good)


def bomb_zip() -> bytes:
    """Small when zipped, exactly the unzipped quota when unpacked."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("app.py", HANDLER.replace("VERSION", "1"))
        with archive.open("padding.bin", "w") as padding:
            chunk = bytes(1024 * 1024)
            for _ in range(UNZIPPED_LIMIT // len(chunk)):
                padding.write(chunk)
    return buffer.getvalue()


def create(lambda_role: str, code: dict, name: str | None = None) -> str:
    name = name or f"fn-{uuid.uuid4().hex[:10]}"
    lam().create_function(
        FunctionName=name, Runtime="python3.12", Role=lambda_role, Handler="app.handler", Code=code, Timeout=30
    )
    return name


def assert_refused(call, code: str, message: str, status: int = 400):
    with pytest.raises(lam().exceptions.ClientError) as refused:
        call()
    response = refused.value.response
    assert (response["Error"]["Code"], response["Error"]["Message"]) == (code, message)
    assert response["ResponseMetadata"]["HTTPStatusCode"] == status
    assert response["ResponseMetadata"]["RetryAttempts"] == 0


def absent(name: str) -> bool:
    try:
        lam().get_function(FunctionName=name)
    except lam().exceptions.ResourceNotFoundException:
        return True
    return False


@pytest.mark.parametrize(
    "package", [b"not a zip at all", b"PK\x03\x04broken", corrupt_zip()], ids=["text", "truncated", "corrupt-member"]
)
def test_create_function_refuses_a_zip_that_cannot_be_unzipped(lambda_role, package):
    name = f"fn-{uuid.uuid4().hex[:10]}"
    assert_refused(
        lambda: create(lambda_role, {"ZipFile": package}, name), "InvalidParameterValueException", UNZIP_MESSAGE
    )
    assert absent(name)


def test_create_function_refuses_a_bad_zip_from_s3_too(lambda_role):
    s3, bucket = clients.client("s3"), f"code-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="fn.zip", Body=b"not a zip at all")
    name = f"fn-{uuid.uuid4().hex[:10]}"
    assert_refused(
        lambda: create(lambda_role, {"S3Bucket": bucket, "S3Key": "fn.zip"}, name),
        "InvalidParameterValueException",
        UNZIP_MESSAGE,
    )
    assert absent(name)


@pytest.mark.timeout(300)
def test_create_function_refuses_a_package_that_unzips_past_the_quota(lambda_role):
    name = f"fn-{uuid.uuid4().hex[:10]}"
    message = f"Unzipped size must be smaller than {UNZIPPED_LIMIT} bytes"
    assert_refused(
        lambda: create(lambda_role, {"ZipFile": bomb_zip()}, name), "InvalidParameterValueException", message
    )
    assert absent(name)


def test_update_function_code_refuses_a_bad_zip_and_keeps_the_code_it_had(lambda_role):
    name = create(lambda_role, {"ZipFile": zip_source(HANDLER.replace("VERSION", "1"))})
    before = lam().get_function(FunctionName=name)["Configuration"]
    assert_refused(
        lambda: lam().update_function_code(FunctionName=name, ZipFile=b"not a zip at all"),
        "InvalidParameterValueException",
        UNZIP_MESSAGE,
    )
    after = lam().get_function(FunctionName=name)["Configuration"]
    assert (after["CodeSha256"], after["CodeSize"]) == (before["CodeSha256"], before["CodeSize"])
    answer = lam().invoke(FunctionName=name, Payload=b"{}")
    assert "FunctionError" not in answer and json.loads(answer["Payload"].read())["version"] == 1


def padded(size: int) -> bytes:
    """A JSON event of exactly `size` bytes."""
    event = b'{"pad": "' + b"a" * (size - len(b'{"pad": ""}')) + b'"}'
    assert len(event) == size
    return event


@pytest.fixture(scope="module")
def echo(lambda_role):
    return create(lambda_role, {"ZipFile": zip_source(HANDLER.replace("VERSION", "1"))})


@pytest.mark.parametrize("size", [6 * 1024 * 1024 + 1, 7 * 1024 * 1024, 30 * 1024 * 1024])
def test_a_synchronous_invoke_past_6_mb_is_refused_with_413(echo, size):
    message = "Request must be smaller than 6291456 bytes for the InvokeFunction operation"
    assert_refused(
        lambda: lam().invoke(FunctionName=echo, Payload=padded(size)), "RequestEntityTooLargeException", message, 413
    )


def test_a_synchronous_invoke_of_exactly_6_mb_runs(echo):
    size = 6 * 1024 * 1024
    answer = lam().invoke(FunctionName=echo, Payload=padded(size))
    assert json.loads(answer["Payload"].read())["size"] == size - len(b'{"pad": ""}')


@pytest.mark.parametrize("size", [1024 * 1024 + 1, 2 * 1024 * 1024])
def test_an_event_invoke_past_1_mb_is_refused_with_413(echo, size):
    message = f"{size} byte payload is too large for the Event invocation type (limit 1048576 bytes)"
    assert_refused(
        lambda: lam().invoke(FunctionName=echo, InvocationType="Event", Payload=padded(size)),
        "RequestEntityTooLargeException",
        message,
        413,
    )


def test_an_event_invoke_of_exactly_1_mb_is_accepted(echo):
    assert lam().invoke(FunctionName=echo, InvocationType="Event", Payload=padded(1024 * 1024))["StatusCode"] == 202


def test_the_same_bad_package_is_refused_every_time_and_a_good_one_after_it_is_taken(lambda_role):
    """Verdicts are remembered by the package's digest: a remembered refusal still refuses,
    and it says nothing about other bytes."""
    bad = corrupt_zip()
    for _ in range(2):
        name = f"fn-{uuid.uuid4().hex[:10]}"
        assert_refused(
            lambda: create(lambda_role, {"ZipFile": bad}, name), "InvalidParameterValueException", UNZIP_MESSAGE
        )
        assert absent(name)
    good = create(lambda_role, {"ZipFile": zip_source(HANDLER.replace("VERSION", "3"))})
    assert json.loads(lam().invoke(FunctionName=good, Payload=b"{}")["Payload"].read())["version"] == 3


def test_each_distinct_package_is_read_back_once(monkeypatch):
    """CreateFunction reads every member of a package back once per distinct package, not once
    per function: a deploy makes many functions from a few zips."""
    from idemlab.embedded import lambda_api

    checked = []
    real_check = lambda_api._check_package

    def counting_check(code):
        checked.append(code)
        return real_check(code)

    monkeypatch.setattr(lambda_api, "_check_package", counting_check)
    monkeypatch.setattr(lambda_api, "VERDICTS", lambda_api._VerdictCache(2))
    good, bad, other = zip_source(HANDLER.replace("VERSION", "4")), corrupt_zip(), zip_source("x = 1\n")
    assert [lambda_api.code_problem(good) for _ in range(3)] == [None, None, None]
    assert [lambda_api.code_problem(bad) for _ in range(2)] == [UNZIP_MESSAGE, UNZIP_MESSAGE]
    assert checked == [good, bad]
    lambda_api.code_problem(other)  # a third package: the oldest verdict (good's) is dropped
    lambda_api.code_problem(good)
    assert checked == [good, bad, other, good]
