"""`make up` / `make down` as a learner meets them: start, reuse, clear errors, stop."""

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest.mock
from pathlib import Path

import pytest

from idemlab import settings
from idemlab.embedded.server import EmbeddedBackend, free_port, health
from support.cli import lab_cli as lab
from support.cli import lab_cli_process as lab_process
from support.health import answer as health_answer


@pytest.mark.timeout(120)
def test_up_twice_reuses_the_backend_and_down_stops_it():
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    try:
        first = lab("up", port=port)
        assert first.returncode == 0, first.stderr
        assert "embedded backend up" in first.stdout and "scheduler firer up" in first.stdout
        assert health_answer(url)
        second = lab("up", port=port)
        assert second.returncode == 0, second.stderr
        assert "reusing it" in second.stdout
    finally:
        stopped = lab("down", port=port)
    assert stopped.returncode == 0, stopped.stderr
    assert "embedded backend stopped" in stopped.stdout
    assert health(url) is None


@pytest.mark.timeout(300)
def test_up_reuses_its_own_backend_while_it_is_too_busy_to_answer():
    """A backend the lab's pid file names, whose process listens on the port, is the lab's
    own however slowly it answers: stopped with SIGSTOP it answers nothing at all (as a
    loaded machine answers late), and `lab up` waits for it, saying so, until it goes on."""
    port = free_port()
    try:
        assert lab("up", port=port).returncode == 0
        pid = int((settings.STATE_DIR / f"embedded-{port}.pid").read_text())
        os.kill(pid, signal.SIGSTOP)
        try:
            second = lab_process("up", port=port)
            seen = ""
            for line in second.stdout:  # until the first word of its wait, or its end
                if "is busy" in line or "reusing" in line:
                    seen = line
                    break
        finally:
            os.kill(pid, signal.SIGCONT)
        out, err = second.communicate(timeout=240)
        assert "holds the port but is busy" in seen, f"no wait was announced; it said: {seen}{out}{err}"
        assert second.returncode == 0, err
        assert f"(pid {pid}), reusing it" in out
    finally:
        lab("down", port=port)


@pytest.mark.timeout(300)
def test_a_backend_slower_to_start_than_a_minute_is_waited_for():
    """A loaded machine can keep a starting server from answering for over a minute: its
    process is stopped from the moment it is spawned for 65 s (longer than the minute the
    start once allowed), and start() still returns the server, up, once it answers."""
    server = EmbeddedBackend()
    spawned = threading.Event()
    real_popen = subprocess.Popen

    def popen_then_stop(*args, **kwargs):
        process = real_popen(*args, **kwargs)
        os.kill(process.pid, signal.SIGSTOP)
        spawned.set()
        return process

    def resume_later():
        spawned.wait()
        time.sleep(65)  # the slowness injected, not a synchronisation
        os.kill(server.process.pid, signal.SIGCONT)

    resumer = threading.Thread(target=resume_later)
    resumer.start()
    try:
        with unittest.mock.patch.object(subprocess, "Popen", popen_then_stop):
            server.start()
        assert health_answer(server.url)
    finally:
        resumer.join()
        server.stop()


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
    result = subprocess.run(
        [sys.executable, "-m", "idemlab", "status"], capture_output=True, text=True, env=env, cwd=settings.ROOT
    )
    assert result.returncode == 1
    assert "embedded, localstack, aws" in result.stderr


# LocalStack without the Docker Compose plugin. This machine has no Docker engine, so only
# the decision and the command lines are tested: a stub `docker` script on a private PATH
# stands in for the Docker CLI and answers only `docker compose version` (present or absent).
# Nothing here fakes LocalStack or AWS; starting the container is checked where Docker runs.

STUB_DOCKER = """#!/bin/sh
if [ "$1" = "compose" ] && [ "$2" = "version" ]; then
  {answer}
fi
echo "stub docker: only 'compose version' is answered" >&2
exit 1
"""


def stub_docker_path(tmp_path, compose_present: bool) -> str:
    answer = (
        'echo "Docker Compose version v2.29.7"; exit 0'
        if compose_present
        else "echo \"docker: 'compose' is not a docker command.\" >&2; exit 1"
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(STUB_DOCKER.format(answer=answer))
    docker.chmod(0o755)
    return str(bin_dir)


def test_compose_starts_localstack_when_its_plugin_answers(tmp_path):
    from idemlab.backends import localstack_common, localstack_docker

    launcher = localstack_docker.localstack_launcher({"PATH": stub_docker_path(tmp_path, compose_present=True)})
    compose = ["docker", "compose", "-f", str(localstack_common.COMPOSE_FILE)]
    assert (launcher.tool, launcher.up, launcher.down, launcher.wait) == (
        "docker compose",
        [*compose, "up", "-d"],
        [*compose, "down"],
        None,
    )


def test_without_the_compose_plugin_the_pinned_cli_starts_the_compose_files_image_and_settings(tmp_path):
    import yaml

    from idemlab.backends import localstack_common, localstack_docker

    env = {"PATH": stub_docker_path(tmp_path, compose_present=False), "LOCALSTACK_AUTH_TOKEN": "ls-secret"}
    launcher = localstack_docker.localstack_launcher(env)
    cli = str(Path(sys.executable).with_name("localstack"))
    assert launcher.tool == "LocalStack CLI"
    assert launcher.up[:4] == [cli, "start", "--detached", "--no-banner"]
    assert launcher.wait == [cli, "wait", "-t", str(localstack_common.LOCALSTACK_READY_SECONDS)] and launcher.down == [
        cli,
        "stop",
    ]
    # The same image, container name, loopback-only gateway and settings as docker-compose.yml.
    service = yaml.safe_load(localstack_common.COMPOSE_FILE.read_text())["services"]["localstack"]
    assert launcher.env["IMAGE_NAME"] == "localstack/localstack:4.14.0"
    assert (
        launcher.env["MAIN_CONTAINER_NAME"]
        == "idemlab-localstack"
        == localstack_common.interpolate(service["container_name"], {})
    )
    assert launcher.env["GATEWAY_LISTEN"] == "127.0.0.1:4566" and "GATEWAY_LISTEN=:4566" in launcher.up
    passed = {
        arg.split("=", 1)[0]: arg.split("=", 1)[1]
        for flag, arg in zip(launcher.up, launcher.up[1:], strict=False)
        if flag == "-e"
    }
    for name, value in service["environment"].items():
        if name.startswith("LOCALSTACK_"):
            continue
        assert passed[name] == localstack_common.interpolate(value, {}), name
    assert passed["LAMBDA_IGNORE_ARCHITECTURE"] == "1"
    # The token reaches the CLI through its environment (it forwards LOCALSTACK_*), never argv.
    assert launcher.env["LOCALSTACK_AUTH_TOKEN"] == "ls-secret" and not any("ls-secret" in arg for arg in launcher.up)
    newer = localstack_docker.localstack_launcher({**env, "LOCALSTACK_IMAGE": "localstack/localstack:2026.3.0"})
    assert newer.env["IMAGE_NAME"] == "localstack/localstack:2026.3.0"


def test_the_cli_extra_is_pinned_to_the_release_of_the_image():
    from idemlab.backends import localstack_common, localstack_docker

    image = localstack_common.compose_service({})["image"]
    assert (
        localstack_docker.localstack_cli_requirement()
        == [f"localstack=={image.rsplit(':', 1)[1]}"]
        == ["localstack==4.14.0"]
    )


def test_no_docker_and_nothing_native_localstack_needs_is_one_clear_line(tmp_path):
    """Without a Docker engine LocalStack starts natively; on a machine without its parts, one
    line names every part missing (no Java, npm or compiler on this empty PATH)."""
    (tmp_path / "empty").mkdir()
    env = {**os.environ, "BACKEND": "localstack", "LAB_PORT": str(free_port()), "PATH": str(tmp_path / "empty")}
    for name in ("AWS_ENDPOINT_URL", "JAVA_HOME"):
        env.pop(name, None)
    result = subprocess.run(
        [sys.executable, "-m", "idemlab", "up"], capture_output=True, text=True, env=env, cwd=settings.ROOT, timeout=60
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "native LocalStack needs" in lines[0] and "JDK 17" in lines[0] and "npm" in lines[0], result.stderr
