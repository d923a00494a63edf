"""Which backend the lab talks to, and where it is.

Every notebook, test and tool reads these values, so a learner switches the whole
lab with one variable: ``BACKEND=embedded|localstack|aws``.
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE_DIR = ROOT / ".lab"  # pid files, logs, Terraform working copies
BUILD_DIR = ROOT / "build"  # function zips
MODULE_DIR = ROOT / "terraform" / "modules" / "idempotency_lab"
BACKENDS = ("embedded", "localstack", "aws")


def region() -> str:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


@functools.cache
def docker_engine_answers() -> bool:
    """Whether a Docker engine (not just the client) answers. Asked once per process: a slow
    engine must not turn one notebook's clients to another backend half way through (the
    Makefile decides once for everything it starts, for the same reason)."""
    try:
        docker = subprocess.run(["docker", "info"], capture_output=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):  # no docker client at all, or no answer
        return False
    return docker.returncode == 0


def backend(chosen: str | None = None) -> str:
    """``chosen``, else $BACKEND, else LocalStack when a Docker engine answers, else embedded.

    ``BACKEND=aws`` with ``AWS_ENDPOINT_URL`` set is refused: Terraform would deploy to AWS
    while every boto3 client of the lab followed the variable to an emulator.
    """
    chosen = (chosen or os.environ.get("BACKEND", "")).strip().lower()
    if not chosen:
        return "localstack" if docker_engine_answers() else "embedded"
    if chosen not in BACKENDS:
        raise ValueError(f"backend {chosen!r} is not one of {', '.join(BACKENDS)}")
    if chosen == "aws" and os.environ.get("AWS_ENDPOINT_URL"):
        raise ValueError(
            f"BACKEND=aws, but AWS_ENDPOINT_URL={os.environ['AWS_ENDPOINT_URL']} would send the lab's clients "
            "to an emulator while Terraform deploys to AWS: unset AWS_ENDPOINT_URL"
        )
    return chosen


def port() -> int:
    return int(os.environ.get("LAB_PORT", 4566))  # LocalStack's edge port; the embedded backend uses it too


def endpoint_url() -> str | None:
    """The endpoint every client uses; None on AWS (the SDK's own endpoints)."""
    return os.environ.get("AWS_ENDPOINT_URL") or (None if backend() == "aws" else f"http://127.0.0.1:{port()}")
