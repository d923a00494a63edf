"""Native LocalStack's install from an empty cache: what a new machine does once. The backend
this stage runs on was installed from the user's cache. Where that cache was cold when the
stage began (a new machine: `make test-localstack` sets NATIVE_CACHE_AT_START=cold), the
stage's own `make up` just took the path from nothing, and this test checks what it built.
Where it was warm, this test takes that path itself, in a cache of its own (a few minutes)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from idemlab.localstack_native import cache
from idemlab.localstack_native import install as native

pytestmark = pytest.mark.skipif(bool(native.missing()), reason="native LocalStack cannot run on this machine")

PLUGINS = (
    "import importlib.metadata as metadata;"
    "print(metadata.version('localstack-core'),"
    " sorted(point.name for point in metadata.entry_points(group='localstack.lambda.runtime_executor')))"
)


def check_entry(entry: native.Entry, clone: Path) -> None:
    """What a complete entry holds, and that LocalStack's venv finds the clone's executor."""
    assert cache.is_complete(entry.folder)
    # What LocalStack would otherwise download at run time, in place in its static libs.
    for part in (
        "java/21/bin/java",
        "dynamodb-local/2/DynamoDBLocal.jar",
        "dynamodb-local/2/ddb-local-loader-0.1.jar",
    ):
        assert (entry.lib / part).exists(), part
    assert list(entry.lib.glob("kinesis-local/*/node_modules/kinesis-local/main.js"))
    assert entry.loopback_library.exists()
    assert sorted(path.name for path in entry.runtimes.iterdir()) == sorted(native.lambda_interpreters())
    env = {**os.environ, **native.settings_for(4611, {}, entry)}
    env["PYTHONPATH"] = str(clone / native.EXECUTOR_SITE.name)
    env.pop("LD_PRELOAD")
    found = subprocess.run(
        [str(entry.python), "-c", PLUGINS], capture_output=True, text=True, env=env, cwd=clone, timeout=120
    )
    assert found.stdout.strip() == f"{native.LOCALSTACK_VERSION} ['docker', 'process']", found.stderr


def check_warm_install_runs_nothing(entry: native.Entry, clone: Path, monkeypatch) -> None:
    def run(command, what, log, **options):
        raise AssertionError(f"a warm cache ran an install step: {what}")

    monkeypatch.setattr(native, "run", run)
    assert native.install(clone) == entry


@pytest.mark.timeout(1200)  # the whole install on a loaded 2-core machine
def test_an_empty_cache_installs_everything_and_a_warm_one_nothing(tmp_path, monkeypatch):
    if os.environ.get("NATIVE_CACHE_AT_START") == "cold":
        # This stage's `make up` built the entry from nothing: check that one, not a second build.
        entry = native.install()
        check_entry(entry, native.NATIVE_DIR)
        check_warm_install_runs_nothing(entry, tmp_path / "another-clone", monkeypatch)
        return
    monkeypatch.setenv(cache.CACHE_DIR_VARIABLE, str(tmp_path / "cache"))
    try:
        entry = native.install(tmp_path / "clone")
        check_entry(entry, tmp_path / "clone")
        check_warm_install_runs_nothing(entry, tmp_path / "another-clone", monkeypatch)
    finally:
        shutil.rmtree(tmp_path / "cache", ignore_errors=True)  # 600 MB
