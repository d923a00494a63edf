"""The take-home plugin's promises, each against the embedded backend on loopback.

The handler under test is a small module written to a temporary folder: `record`
writes one row per call (the effect), `handler` holds for a moment, then records.
"""

from __future__ import annotations

import io
import itertools
import textwrap
import zipfile

import pytest

from idemlab.testing import (
    Crash,
    CrashError,
    CrashNotReached,
    DeliveryError,
    DuplicateEffectError,
    Handler,
    HandlerError,
)

ROUNDS = 20
PROBE = """
import os, time, uuid
import boto3

effects = boto3.resource("dynamodb").Table(os.environ["EFFECTS_TABLE"])


def record(event):
    effects.put_item(Item={"pk": f"{event['id']}#{uuid.uuid4().hex}", "id": event["id"]})


def unused():
    pass


def handler(event, context):
    time.sleep(event.get("hold", 0))
    record(event)
    return {"pid": os.getpid()}
"""
# Holds `record` under its own name, as `from shop.payments import charge` would.
ALIAS = """
from probe import record


def handler(event, context):
    record(event)
    return "recorded"
"""


@pytest.fixture(scope="module")
def code(tmp_path_factory):
    root = tmp_path_factory.mktemp("probe-code")
    (root / "probe.py").write_text(textwrap.dedent(PROBE))
    (root / "probe_alias.py").write_text(textwrap.dedent(ALIAS))
    return root


@pytest.fixture
def effects(idemlab):
    table = idemlab.make_table("plugin-effects")
    idemlab.environment["EFFECTS_TABLE"] = table.name

    def count(event) -> int:
        return sum(1 for item in table.scan(ConsistentRead=True)["Items"] if item["id"] == event["id"])

    return count


def probe(code, name: str = "probe.handler") -> Handler:
    return Handler.module(name, code_root=code)


@pytest.mark.race
def test_copies_sent_together_run_at_the_same_time_in_separate_processes(idemlab, code, effects):
    idemlab.deliver(probe(code), {"id": "fewer"}, copies=2)  # two warm environments; the rounds need three
    overlapping = 0
    for number in range(ROUNDS):
        # Each copy holds 0.3 s: copies released together overlap even when a busy runner
        # starts one of them late (with 0.05 s, one round in twenty missed at load ~12);
        # copies sent one after another still cannot overlap.
        delivery = idemlab.deliver(probe(code), {"id": f"together-{number}", "hold": 0.3}, copies=3)
        copies = delivery.copies
        assert all(copy.ok for copy in copies)
        assert len({copy.pid for copy in copies}) == 3, "each copy needs an execution environment of its own"
        if max(copy.started for copy in copies) < min(copy.ended for copy in copies):
            overlapping += 1
    assert overlapping == ROUNDS


def test_copies_sent_one_after_another_never_overlap(idemlab, code, effects):
    for number in range(5):
        copies = idemlab.deliver(probe(code), {"id": f"apart-{number}"}, copies=3, together=False).copies
        for earlier, later in itertools.pairwise(copies):
            assert earlier.answered <= later.sent and earlier.ended <= later.started


def test_a_crash_after_the_named_function_kills_exactly_one_copy_after_its_effect(idemlab, code, effects):
    crash = Crash.after("probe.record", how="exit")
    for number in range(10):
        event = {"id": f"crash-{number}", "hold": 0.02}
        delivery = idemlab.deliver(probe(code), event, copies=2, crash=crash)
        assert sorted(str(copy.error_type) for copy in delivery.copies) == ["None", "Runtime.ExitError"]
        assert delivery.crashes == 1
        assert effects(event) == 2  # the crashed copy had recorded before it died


def test_a_crash_reaches_the_function_where_another_module_imported_it_by_name(idemlab, code, effects):
    event = {"id": "alias"}
    delivery = idemlab.deliver(probe(code, "probe_alias.handler"), event, copies=1, crash=Crash.before("probe.record"))
    assert delivery.copies[0].error_type == "Runtime.ExitError"
    assert effects(event) == 0


def test_a_timeout_crash_is_stopped_by_the_function_timeout(idemlab, code, effects):
    event = {"id": "timeout"}
    # The clock starts with the invocation: the record and the crash's own write come before
    # the stop, inside it. 1 s was a guess that two writes always fit; 5 s leave a loaded
    # runner room, and the copy waits them out only once.
    delivery = idemlab.deliver(
        probe(code), event, copies=1, crash=Crash.after("probe.record", how="timeout"), timeout=5
    )
    assert delivery.copies[0].error_type == "Sandbox.Timedout"
    assert effects(event) == 1


def test_a_crash_point_no_copy_reaches_fails_the_test_by_name(idemlab, code, effects):
    with pytest.raises(CrashNotReached, match=r"probe.unused"):
        idemlab.assert_exactly_once(
            probe(code), lambda n: {"id": f"unreached-{n}"}, effects, rounds=1, crash=Crash.after("probe.unused")
        )


def test_a_crash_point_that_does_not_exist_is_reported_when_the_handler_loads(idemlab, code, effects):
    with pytest.raises(DeliveryError, match=r"could not find the crash point 'probe.missing'"):
        idemlab.deliver(probe(code), {"id": "missing"}, crash=Crash.after("probe.missing"))


def test_a_zip_and_its_handler_name_are_delivered_as_uploaded(idemlab, effects):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("app.py", "def handler(event, context):\n    return {'echo': event}\n")
    delivery = idemlab.deliver(Handler.zip(buffer.getvalue(), "app.handler"), {"id": "zip"}, copies=2)
    assert delivery.results == [{"echo": {"id": "zip"}}] * 2


def test_a_doubled_effect_fails_with_the_rounds_counts_and_timeline(idemlab, code, effects):
    with pytest.raises(DuplicateEffectError) as failure:
        idemlab.assert_exactly_once(probe(code), lambda n: {"id": f"twice-{n}"}, effects, rounds=3, together=False)
    message = str(failure.value)
    assert message.startswith(
        "probe.handler: the effect was not exactly once. It happened MORE than once in 3 of 3 rounds"
    )
    assert "2 times:    3 rounds  WRONG  (rounds 0, 1, 2)" in message
    assert "Round 0, event" in message and "copy  pid" in message
    assert failure.value.report.doubled() == [0, 1, 2]


def test_an_effect_that_never_happened_fails_as_lost(idemlab, code, effects):
    with pytest.raises(DuplicateEffectError, match="LOST in 2 of 2 rounds"):
        idemlab.assert_exactly_once(probe(code), lambda n: {"id": f"none-{n}"}, lambda event: 0, rounds=2, copies=1)


@pytest.mark.parametrize(
    "make, error",
    [
        (lambda: Crash.after("record"), CrashError),
        (lambda: Crash.after("probe.record", how="explode"), CrashError),
        (lambda: Crash("probe.record", when="during"), CrashError),
        (lambda: Crash.after("probe.record", times=0), CrashError),
        (lambda: Handler.module("handler"), HandlerError),
        (lambda: Handler.module("no_such_module_anywhere.handler"), HandlerError),
        (lambda: Handler.module("boto3.client"), HandlerError),  # an installed library, not your code
        (lambda: Handler.zip(b"not a zip", "app.handler"), HandlerError),
    ],
)
def test_bad_crash_points_and_handlers_are_refused_with_a_clear_error(make, error):
    with pytest.raises(error):
        make()


def test_bad_delivery_options_are_refused_before_anything_is_deployed(idemlab, code):
    before = idemlab.client("lambda").list_functions()["Functions"]
    with pytest.raises(ValueError, match="copies must be"):
        idemlab.deliver(probe(code), {}, copies=0)
    with pytest.raises(TypeError, match="crash must be a Crash"):
        idemlab.deliver(probe(code), {}, crash="probe.record")
    assert idemlab.client("lambda").list_functions()["Functions"] == before


def test_boto3_points_at_the_backend_only_while_a_test_uses_the_plugin(tmp_path, pytestconfig):
    """Run a two-test session in a subprocess: the variables are restored after the first."""
    import os
    import subprocess
    import sys

    (tmp_path / "test_env.py").write_text(
        textwrap.dedent(
            """
            import os
            import boto3

            def test_uses_the_plugin(idemlab):
                assert os.environ["AWS_ENDPOINT_URL"] == idemlab.url
                assert "AWS_PROFILE" not in os.environ and "AWS_ENDPOINT_URL_DYNAMODB" not in os.environ
                assert boto3.client("dynamodb").list_tables()["TableNames"] == []

            def test_after_it():
                assert os.environ["AWS_ENDPOINT_URL"] == "http://original.invalid"
                assert os.environ["AWS_PROFILE"] == "someone"
                assert os.environ["AWS_ENDPOINT_URL_DYNAMODB"] == "http://dynamodb.invalid"
            """
        )
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
        "AWS_ENDPOINT_URL": "http://original.invalid",
        "AWS_PROFILE": "someone",
        "AWS_ENDPOINT_URL_DYNAMODB": "http://dynamodb.invalid",
    }
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_env.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout
