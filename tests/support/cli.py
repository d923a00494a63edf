"""The lab's command line (`python -m idemlab`, what the Makefile calls) run as a learner's
shell would, on an embedded backend at a given port."""

from __future__ import annotations

import os
import subprocess
import sys

from idemlab import settings


def lab_cli(*args: str, port: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "BACKEND": "embedded", "LAB_PORT": str(port)}
    env.pop("AWS_ENDPOINT_URL", None)  # the CLI derives it from LAB_PORT
    return subprocess.run(
        [sys.executable, "-m", "idemlab", *args], capture_output=True, text=True, env=env, cwd=settings.ROOT, timeout=60
    )
