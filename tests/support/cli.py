"""The lab's command line (`python -m idemlab`, what the Makefile calls) run as a learner's
shell would, on an embedded backend at a given port."""

from __future__ import annotations

import os
import subprocess
import sys

from idemlab import settings


def _env(port: int) -> dict[str, str]:
    env = {**os.environ, "BACKEND": "embedded", "LAB_PORT": str(port)}
    env.pop("AWS_ENDPOINT_URL", None)  # the CLI derives it from LAB_PORT
    return env


def lab_cli(*args: str, port: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "idemlab", *args],
        capture_output=True,
        text=True,
        env=_env(port),
        cwd=settings.ROOT,
        timeout=60,
    )


def lab_cli_process(*args: str, port: int) -> subprocess.Popen:
    """The same command, running: read its lines as it prints them."""
    return subprocess.Popen(
        [sys.executable, "-m", "idemlab", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(port),
        cwd=settings.ROOT,
    )
