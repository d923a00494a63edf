"""What every LocalStack the lab meets shares, however it runs (in Docker or as local
processes): the settings of docker-compose.yml, their one owner; its health answer; and what
`make up` says of one that already answers.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import urllib.request

import yaml  # PyYAML comes with moto[server]

from idemlab import settings
from idemlab.backends import BackendError
from idemlab.backends.daemons import NATIVE

LOCALSTACK_READY_SECONDS = 180  # first start pulls the image; later starts take seconds
COMPOSE_FILE = settings.ROOT / "docker-compose.yml"


def health(url: str) -> dict | None:
    """LocalStack's health answer on ``url``, or None when nothing answers within 2 s."""
    with contextlib.suppress(OSError, ValueError), urllib.request.urlopen(url + "/_localstack/health", timeout=2) as r:
        return json.loads(r.read())
    return None


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's ${NAME:-default} and ${NAME} substitution."""
    return re.sub(r"\$\{(\w+)(?::-([^}]*))?\}", lambda m: env.get(m.group(1)) or (m.group(2) or ""), str(value))


def compose_service(env: dict[str, str] | None = None) -> dict:
    """The localstack service of docker-compose.yml, with variables substituted from env."""
    service = yaml.safe_load(COMPOSE_FILE.read_text())["services"]["localstack"]
    sub = functools.partial(interpolate, env=dict(os.environ) if env is None else env)
    return {
        "container_name": sub(service["container_name"]),
        "image": sub(service["image"]),
        "environment": {name: sub(value) for name, value in service["environment"].items()},
        "ports": [sub(port) for port in service["ports"]],
    }


def expected_localstack_version(env: dict[str, str] | None = None) -> str:
    """The version of the image docker-compose.yml names (4.14.0 unless LOCALSTACK_IMAGE says otherwise)."""
    return compose_service(env)["image"].rpartition(":")[2]


def reuse_running_localstack(url: str, found: dict) -> str:
    """What `make up` says of a LocalStack that already answers, or BackendError when it is not the
    version the lab is pinned to (another release behaves differently; its settings are unknown)."""
    version = found.get("version", "unknown")
    expected = expected_localstack_version()
    if version != expected and expected != "latest":
        raise BackendError(
            f"LocalStack {version} already answers on {url}, but the lab needs {expected}: "
            "stop it, or set LAB_PORT to start the lab's own on another port"
        )
    if pid := NATIVE.pid():
        return f"native LocalStack {version} already running on {url} (pid {pid}), reusing it; log {NATIVE.log}"
    return (
        f"LocalStack {version} already running on {url}, reusing it: the lab did not start it, so its "
        "settings may differ from docker-compose.yml's, and `make down` will not stop it"
    )
