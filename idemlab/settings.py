"""Which backend the lab talks to, and where it is.

Every notebook, test and tool reads these values, so a learner switches the whole
lab with one variable: ``BACKEND=embedded|localstack|aws``.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE_DIR = ROOT / ".lab"  # pid files, logs, Terraform working copies
BUILD_DIR = ROOT / "build"  # function zips
MODULE_DIR = ROOT / "terraform" / "modules" / "idempotency_lab"
BACKENDS = ("embedded", "localstack", "aws")
DEFAULT_PARTICIPANT = "lab"
# What `make deploy PARTICIPANT=<name>` remembers, so that the notebooks opened afterwards
# (and every tool run without PARTICIPANT) find the participant's stack without an edited cell.
PARTICIPANT_FILE = STATE_DIR / "participant"
# The region, set once for this clone (`make region REGION=...`, or `make join`): every target
# (deploy, plan, destroy, workshop) and every notebook reads it here, so a plan or a destroy
# can never look in another region than the deploy did.
REGION_FILE = STATE_DIR / "region"
DEFAULT_REGION = "us-east-1"
# The backend `make join` chose from a handout; the Makefile reads the same file, so every
# target it starts agrees with every notebook.
BACKEND_FILE = STATE_DIR / "backend"
# The handout `make join` copied into this clone (idemlab/handout.py): whose stack, where.
JOINED_FILE = STATE_DIR / "joined.json"
# An AWS region name: two letters, words, a number (us-east-1, eu-central-2, us-gov-west-1).
REGION_PATTERN = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]+")


def check_prefix(name: object, what: str = "prefix") -> str:
    """``name`` when the module accepts it as a prefix; else a ValueError that says why."""
    from idemlab import module_spec  # reads the module at MODULE_DIR, defined above

    if not isinstance(name, str) or not module_spec.prefix_pattern().fullmatch(name):
        raise ValueError(
            f"{what} {name!r} must be 1-20 characters of a-z, 0-9 and '-', starting with a letter "
            "and not ending with '-' (the module's prefix rule: every name of the stack starts with it)"
        )
    return name


def participant() -> str:
    """Whose stack: $PARTICIPANT, else the one `make deploy PARTICIPANT=...` remembered, else "lab".

    A participant's name is the prefix of every name of their stack, so it obeys the prefix rule.
    """
    chosen = os.environ.get("PARTICIPANT", "").strip()
    if chosen:
        return check_prefix(chosen, "PARTICIPANT")
    if PARTICIPANT_FILE.exists():
        remembered = PARTICIPANT_FILE.read_text().strip()
        return check_prefix(remembered, f"the participant remembered in {PARTICIPANT_FILE.name}")
    return DEFAULT_PARTICIPANT


def remember_participant(name: str) -> None:
    """What `make deploy PARTICIPANT=<name>` leaves for the notebooks opened afterwards."""
    check_prefix(name, "PARTICIPANT")
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    PARTICIPANT_FILE.write_text(name + "\n")


def check_region(name: object, what: str = "region") -> str:
    """``name`` when it reads as an AWS region name; else a ValueError that says why."""
    if not isinstance(name, str) or not REGION_PATTERN.fullmatch(name):
        raise ValueError(f"{what} {name!r} is not a region name (such as eu-west-1)")
    return name


def region() -> str:
    """The region of every client and of Terraform: the one set once for this clone
    (REGION_FILE), else $AWS_REGION, else $AWS_DEFAULT_REGION, else us-east-1.

    With a region set once, an $AWS_REGION that names another is refused rather than
    followed: a plan or destroy in another region would miss the deployed stack.
    """
    set_once = REGION_FILE.read_text().strip() if REGION_FILE.exists() else ""
    asked = os.environ.get("AWS_REGION", "").strip()
    if set_once:
        check_region(set_once, f"the region in {REGION_FILE.name}")
        if asked and asked != set_once:
            raise ValueError(
                f"AWS_REGION={asked}, but this clone's region is {set_once} (set once, in "
                f".lab/{REGION_FILE.name}): unset AWS_REGION, or move the clone with `make region REGION={asked}`"
            )
        return set_once
    return asked or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION


def set_region(name: str) -> None:
    """What `make region REGION=<name>` leaves for every later target and notebook."""
    check_region(name, "REGION")
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    REGION_FILE.write_text(name + "\n")


def joined() -> dict | None:
    """The handout this clone joined (`make join`), or None: a clone that deploys its own stacks."""
    return json.loads(JOINED_FILE.read_text()) if JOINED_FILE.exists() else None


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
    """``chosen``, else $BACKEND, else the one `make join` chose (BACKEND_FILE), else LocalStack
    when a Docker engine answers, else embedded.

    ``BACKEND=aws`` with ``AWS_ENDPOINT_URL`` set is refused: Terraform would deploy to AWS
    while every boto3 client of the lab followed the variable to an emulator.
    """
    chosen = (chosen or os.environ.get("BACKEND", "")).strip().lower()
    if not chosen and BACKEND_FILE.exists():
        chosen = BACKEND_FILE.read_text().strip().lower()
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
    """The endpoint every client uses; None on AWS (the SDK's own endpoints). A clone that
    joined a stack on an emulator uses the handout's endpoint, where that stack lives."""
    explicit = os.environ.get("AWS_ENDPOINT_URL")
    if explicit:
        return explicit
    if backend() == "aws":
        return None
    handout = joined()
    return (handout or {}).get("endpoint") or f"http://127.0.0.1:{port()}"
