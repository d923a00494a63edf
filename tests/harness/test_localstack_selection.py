"""Choosing and reusing LocalStack as a learner meets it: the backend decided once, a
LocalStack of another release refused, one the lab did not start left running, AWS never
mixed with an emulator's endpoint, and native LocalStack's helpers kept on loopback."""

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from idemlab import settings
from idemlab.localstack_native import install as native


def run_lab(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "idemlab", *args], capture_output=True, text=True, env=env, cwd=settings.ROOT, timeout=60
    )


def test_the_backend_is_decided_once_however_docker_answers_later(tmp_path):
    """A Docker engine that answers once, then not: every client of one process keeps the first answer."""
    calls = tmp_path / "calls"
    docker = tmp_path / "bin" / "docker"
    docker.parent.mkdir()
    docker.write_text(f'#!/bin/sh\necho x >> "{calls}"\n[ "$(wc -l < "{calls}")" -eq 1 ]\n')
    docker.chmod(0o755)
    script = "from idemlab import settings; print([settings.backend() for _ in range(3)])"
    env = {**os.environ, "BACKEND": "", "PATH": f"{docker.parent}:{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.strip() == str(["localstack"] * 3)
    assert calls.read_text().count("x") == 1


def test_aws_with_an_emulators_endpoint_is_refused_in_one_line():
    env = {**os.environ, "BACKEND": "aws", "AWS_ENDPOINT_URL": "http://127.0.0.1:4566"}
    result = run_lab("status", env=env)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "AWS_ENDPOINT_URL" in lines[0] and "unset" in lines[0], result.stderr


class LocalStackHealth(BaseHTTPRequestHandler):
    """Answers /_localstack/health as a LocalStack of ``server.version`` does; nothing else."""

    def do_GET(self):
        body = json.dumps({"services": {}, "edition": "community", "version": self.server.version}).encode()
        self.send_response(200 if self.path == "/_localstack/health" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def running_localstack(request):
    server = ThreadingHTTPServer(("127.0.0.1", 0), LocalStackHealth)
    server.version = request.param
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {**os.environ, "BACKEND": "localstack", "LAB_PORT": str(server.server_address[1])}
    env.pop("AWS_ENDPOINT_URL", None)
    yield env
    server.shutdown()


@pytest.mark.parametrize("running_localstack", ["4.13.1"], indirect=True)
def test_up_refuses_a_running_localstack_of_another_release(running_localstack):
    result = run_lab("up", env=running_localstack)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "LocalStack 4.13.1" in lines[0] and "needs 4.14.0" in lines[0], result.stderr


@pytest.mark.timeout(120)
@pytest.mark.parametrize("running_localstack", ["4.14.0"], indirect=True)
def test_a_localstack_the_lab_did_not_start_is_reused_and_left_running(running_localstack):
    try:
        up = run_lab("up", env=running_localstack)
        assert up.returncode == 0, up.stderr
        assert "the lab did not start it" in up.stdout and "will not stop it" in up.stdout
    finally:
        down = run_lab("down", env=running_localstack)
    assert down.returncode == 0, down.stderr
    assert "not started by the lab: not stopping it" in down.stdout
    port = int(running_localstack["LAB_PORT"])
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass  # still answering


LISTENER = """
import socket
four = socket.socket(socket.AF_INET)
four.bind(("0.0.0.0", 0))
six = socket.socket(socket.AF_INET6)
six.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
six.bind(("::", 0))
six.listen()
only_six = socket.socket(socket.AF_INET6)
only_six.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
only_six.bind(("::", 0))
with socket.create_connection(("127.0.0.1", six.getsockname()[1])):
    pass  # an IPv4 client of 127.0.0.1 still reaches the dual-stack listener
print(four.getsockname()[0], six.getsockname()[0], only_six.getsockname()[0])
"""


@pytest.mark.skipif(not (shutil.which("cc") or shutil.which("gcc")), reason="needs a C compiler")
def test_the_loopback_only_library_binds_any_address_to_loopback(tmp_path):
    library = native.build_loopback_library(tmp_path / "loopback_only.so", tmp_path / "install.log")
    bare = subprocess.run([sys.executable, "-c", LISTENER], capture_output=True, text=True, check=True)
    assert bare.stdout.split() == ["0.0.0.0", "::", "::"]  # what the helpers bind without it
    env = {**os.environ, "LD_PRELOAD": str(library)}
    loaded = subprocess.run([sys.executable, "-c", LISTENER], capture_output=True, text=True, env=env, check=True)
    assert loaded.stdout.split() == ["127.0.0.1", "::ffff:127.0.0.1", "::1"]
