"""`make up` / `make down` as a learner meets them: start, reuse, clear errors, stop."""

import os
import socket
import subprocess
import sys

import pytest

from idemlab import settings
from idemlab.embedded.server import free_port, health


def lab(*args: str, port: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "BACKEND": "embedded", "LAB_PORT": str(port)}
    env.pop("AWS_ENDPOINT_URL", None)  # the CLI derives it from LAB_PORT
    return subprocess.run([sys.executable, "-m", "idemlab", *args], capture_output=True, text=True, env=env, cwd=settings.ROOT, timeout=60)


@pytest.mark.timeout(120)
def test_up_twice_reuses_the_backend_and_down_stops_it():
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    try:
        first = lab("up", port=port)
        assert first.returncode == 0, first.stderr
        assert "embedded backend up" in first.stdout and "scheduler firer up" in first.stdout
        assert health(url)
        second = lab("up", port=port)
        assert second.returncode == 0, second.stderr
        assert "reusing it" in second.stdout
    finally:
        stopped = lab("down", port=port)
    assert stopped.returncode == 0, stopped.stderr
    assert "embedded backend stopped" in stopped.stdout
    assert health(url) is None


@pytest.mark.timeout(60)
def test_busy_port_is_one_clear_line_that_names_the_log():
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        result = lab("up", port=port)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"port {port} is busy" in lines[0] and ".log" in lines[0]


def test_unknown_backend_is_refused_with_the_choices():
    env = {**os.environ, "BACKEND": "lokalstack"}
    result = subprocess.run([sys.executable, "-m", "idemlab", "status"], capture_output=True, text=True, env=env, cwd=settings.ROOT)
    assert result.returncode == 1
    assert "embedded, localstack, aws" in result.stderr
