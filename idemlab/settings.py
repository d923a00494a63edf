"""Which backend the lab talks to, and where it is.

Every notebook, test and tool reads these values, so a learner switches the whole
lab with one variable: ``BACKEND=embedded|localstack|aws``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE_DIR = ROOT / ".lab"  # pid files, logs, Terraform working copies
BUILD_DIR = ROOT / "build"  # function zips

BACKENDS = ("embedded", "localstack", "aws")
DEFAULT_PORT = 4566  # LocalStack's edge port; the embedded backend uses it too
DEFAULT_REGION = "us-east-1"


def region() -> str:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION


def docker_engine_answers() -> bool:
    """True when a Docker engine (not just the client) responds."""
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=5).returncode == 0
    except (OSError, subprocess.TimeoutExpired):  # no docker client at all, or no answer
        return False


def backend() -> str:
    """The selected backend: $BACKEND, else LocalStack when Docker runs, else embedded."""
    chosen = os.environ.get("BACKEND", "").strip().lower()
    if not chosen:
        return "localstack" if docker_engine_answers() else "embedded"
    if chosen not in BACKENDS:
        raise ValueError(f"BACKEND={chosen!r} is not one of {', '.join(BACKENDS)}")
    return chosen


def port() -> int:
    return int(os.environ.get("LAB_PORT", DEFAULT_PORT))


def endpoint_url() -> str | None:
    """The endpoint every client uses; None on AWS (the SDK's own endpoints)."""
    return os.environ.get("AWS_ENDPOINT_URL") or (None if backend() == "aws" else f"http://127.0.0.1:{port()}")


def use_local_credentials() -> None:
    """Emulators accept any key; set dummy ones so the SDK never looks further."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")
    os.environ.setdefault("AWS_DEFAULT_REGION", region())
    os.environ.setdefault("AWS_REGION", region())
