"""CI runs the take-home example as a learner would: a fresh virtual environment outside
the repository, on the oldest Python the package supports (3.10), whose packages come only
from installing the built wheel with its `testing` extra, the files of examples/take-home
copied next to it, and plain `pytest`.

Seven tests pass (among them the SQS consumer's, one of which asserts that a consumer is
unsafe, another that survives a crash through the queue; and the two-effect sign-up's, two of
which assert that a handler is unsafe) and two fail on purpose; this checks exactly those two fail, in red, with the
plugin's message. The run has no AWS variables, a HOME without ~/.aws, and
proxies that refuse every address but loopback: nothing may need credentials or network.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time

import pytest

from idemlab import settings
from support.wheel import OLDEST_PYTHON, REPO, build_distributions, pythons

EXAMPLE = REPO / "examples" / "take-home"
RACE_ROUNDS = 100
UV = settings.STATE_DIR / "uv" / "bin" / "uv"  # where `make install` puts it
ANSI = re.compile(r"\x1b\[[0-9;]*m")
RED = "\x1b[31m"
# The workshop's packages (pyproject.toml's `workshop` extra): none of them is the plugin's.
WORKSHOP_ONLY = {"matplotlib", "nbclient", "nbformat", "ipykernel", "terraform-local", "python-hcl2", "jupyterlab"}


def run(command: list[str], **options) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, **options)


@pytest.mark.timeout(1200)
def test_example_project_passes_the_safe_handler_and_fails_the_two_unsafe_ones(tmp_path, record_property):
    python_found = pythons().get(OLDEST_PYTHON)
    oldest = ".".join(map(str, OLDEST_PYTHON))
    assert python_found, f"Python {oldest} not found (on PATH or under ~/.pyenv/versions): install it"
    wheel = build_distributions(tmp_path)["wheel"]
    started = time.monotonic()
    # The learner's `pip install "idemlab-0.1.0-py3-none-any.whl[testing]"`, made by uv's pip
    # interface (the lab's installer, `make install`): the same requirement resolved to the same
    # pins, from the packages uv already holds, in seconds instead of pip's 20 s.
    assert UV.exists(), f"uv is not installed at {UV.relative_to(REPO)}; run `make install`"
    venv = tmp_path / "venv"
    made = run([str(UV), "venv", "--quiet", "--python", python_found, str(venv)])
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    installed = run([str(UV), "pip", "install", "--quiet", "--python", str(python), f"{wheel}[testing]"], timeout=900)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    record_property("install_seconds", round(time.monotonic() - started, 1))
    listed = run([str(UV), "pip", "list", "--python", str(python)], timeout=120)
    installed_names = {line.split()[0].lower() for line in listed.stdout.splitlines()[2:] if line.strip()}
    assert not installed_names & WORKSHOP_ONLY, (
        f"the plugin's install pulled the workshop's {installed_names & WORKSHOP_ONLY}"
    )

    project = tmp_path / "take-home"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__", "README.md"))
    assert sorted(p.name for p in project.iterdir()) == [
        "checkout.py",
        "conftest.py",
        "consumer.py",
        "signup.py",
        "test_checkout.py",
        "test_consumer.py",
        "test_signup.py",
    ]
    (tmp_path / "home").mkdir()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path / "home"),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        # Any request beyond loopback goes to a port where nothing listens.
        "HTTP_PROXY": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    started = time.monotonic()
    tested = run(
        [str(python), "-m", "pytest", "-p", "no:cacheprovider", "--color=yes", "-rfE"],
        cwd=project,
        env=env,
        timeout=600,
    )
    record_property("example_seconds", round(time.monotonic() - started, 1))
    output = ANSI.sub("", tested.stdout)

    failed = sorted(re.findall(r"^FAILED (\S+)", output, re.MULTILINE))
    assert failed == [
        "test_checkout.py::test_handrolled_charges_once_when_retried_after_a_crash",
        "test_checkout.py::test_handrolled_charges_once_when_two_copies_race",
    ], output
    assert re.search(r"\b9 passed\b", output) and re.search(r"\b2 failed\b", output), output
    painted = [line for line in tested.stdout.splitlines() if "E       idemlab.testing.DuplicateEffectError" in line]
    assert len(painted) == 2 and all(RED in line for line in painted), "each failure's message is painted red"

    race = re.search(
        r"checkout\.handrolled: .*MORE than once in (\d+) of (\d+) rounds \(2 copies of each event sent together\)",
        output,
    )
    assert race, output
    doubled, rounds = int(race.group(1)), int(race.group(2))
    record_property("race_doubled_rounds", f"{doubled}/{rounds}")
    assert rounds == RACE_ROUNDS and doubled >= 0.95 * RACE_ROUNDS, output
    assert "CRASHED: the copy exits after checkout.charge (Runtime.ExitError)" in output, output
    assert "sent one after another, and the copy exits after checkout.charge" in output, output

    start = re.search(r"idemlab: the embedded backend started in ([\d.]+) s", output)
    assert start, output
    record_property("backend_start_seconds", float(start.group(1)))
    print(f"example: {doubled}/{rounds} race rounds doubled; backend started in {start.group(1)} s")
