"""The suite's own fixtures: a stack test's time does not include the wait for its deploy.

The suite's conftest runs here in a pytest of its own (a subprocess, so its backend and
environment are its own), with the deploy replaced by a child that takes longer than the
test's timeout. A stack test's setup used to wait for the deploy inside the test's time:
on the LocalStack stage, one worker's deploy waited for the other's, its first stack test
spent its 300 s in setup, and every stack test of that worker failed with it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
# The inner tests' timeout, which also bounds the last test's teardown (the session's: the
# backend stops there): 4 s was passed by that teardown in a CI run at load 40.
TEST_TIMEOUT_SECONDS = 15
DEPLOY_SECONDS = 2 * TEST_TIMEOUT_SECONDS

CONFTEST = textwrap.dedent(
    """
    import importlib.util
    import sys

    sys.path.insert(0, {tests!r})
    spec = importlib.util.spec_from_file_location("suite_conftest", {tests!r} + "/conftest.py")
    suite = importlib.util.module_from_spec(spec)
    sys.modules["suite_conftest"] = suite
    spec.loader.exec_module(suite)
    suite.BackgroundDeploy.SCRIPT = "import sys, time; time.sleep({deploy}); sys.stdout.write('{{}}')"

    # The suite's hooks, and the fixtures the tests below use.
    globals().update(
        {{name: value for name, value in vars(suite).items() if name.startswith("pytest_")}}
    )
    backend, early_stack, stack = suite.backend, suite.early_stack, suite.stack
    """
)

TESTS_OF_THE_INNER_SUITE = textwrap.dedent(
    """
    def test_without_the_stack(backend):
        assert backend.startswith("http://127.0.0.1:")


    def test_with_the_stack(stack):
        assert stack == {}
    """
)


def test_a_stack_test_is_not_timed_while_its_deploy_runs(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(CONFTEST.format(tests=str(TESTS), deploy=DEPLOY_SECONDS))
    (tmp_path / "test_inner.py").write_text(TESTS_OF_THE_INNER_SUITE)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--timeout={TEST_TIMEOUT_SECONDS}", "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**_without_this_workers_variables(), "BACKEND": "embedded"},
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "2 passed" in run.stdout


def _without_this_workers_variables() -> dict:
    """This environment, less what marks it as an xdist worker's (PYTEST_XDIST_WORKER...)."""
    return {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}
