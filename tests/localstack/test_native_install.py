"""Native LocalStack's install from an empty cache: what a new machine does once. The backend
this stage runs on was installed from the user's cache, which is warm on a machine that ran
the lab before; this test keeps the path from nothing tested (a few minutes)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from idemlab.localstack_native import cache
from idemlab.localstack_native import install as native

pytestmark = pytest.mark.skipif(bool(native.missing()), reason="native LocalStack cannot run on this machine")

PLUGINS = (
    "import importlib.metadata as metadata;"
    "print(metadata.version('localstack-core'),"
    " sorted(point.name for point in metadata.entry_points(group='localstack.lambda.runtime_executor')))"
)


@pytest.mark.timeout(1200)  # the whole install on a loaded 2-core machine
def test_an_empty_cache_installs_everything_and_a_warm_one_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.CACHE_DIR_VARIABLE, str(tmp_path / "cache"))
    try:
        entry = native.install(tmp_path / "clone")
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
        # LocalStack's venv, with the clone's executor found through the clone's own folder.
        env = {**os.environ, **native.settings_for(4611, {}, entry)}
        env["PYTHONPATH"] = str(tmp_path / "clone" / native.EXECUTOR_SITE.name)
        env.pop("LD_PRELOAD")
        found = subprocess.run(
            [str(entry.python), "-c", PLUGINS], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
        )
        assert found.stdout.strip() == f"{native.LOCALSTACK_VERSION} ['docker', 'process']", found.stderr

        def run(command, what, log, **options):
            raise AssertionError(f"a warm cache ran an install step: {what}")

        monkeypatch.setattr(native, "run", run)
        assert native.install(tmp_path / "another-clone") == entry
    finally:
        shutil.rmtree(tmp_path / "cache", ignore_errors=True)  # 600 MB
