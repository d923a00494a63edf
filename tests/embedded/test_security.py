"""The embedded backend runs uploaded code: web pages and other machines are refused."""

import http.client
import json
import subprocess
import sys
from urllib.parse import urlsplit

import pytest

from idemlab import settings
from idemlab.embedded.server import free_port

LIST_TABLES = {"X-Amz-Target": "DynamoDB_20120810.ListTables", "Content-Type": "application/x-amz-json-1.0"}


def request(url: str, method: str = "POST", headers: dict | None = None, body: bytes = b"{}"):
    """One raw HTTP request with exactly these headers (Host included), as a browser might send."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        connection.putrequest(method, "/", skip_host=True, skip_accept_encoding=True)
        # moto routes an unsigned request by its Authorization header, as a browser could forge it.
        merged = {
            "Authorization": "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request",
            **LIST_TABLES,
            **(headers or {}),
        }
        for name, value in merged.items():
            connection.putheader(name, value)
        connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def test_a_loopback_request_is_answered(backend):
    port = urlsplit(backend).port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "127.0.0.2"):
        status, _, body = request(backend, headers={"Host": host})
        assert status == 200, (host, body)
        assert "TableNames" in json.loads(body)
    status, _, _ = request(backend, headers={"Host": f"localhost:{port}", "Origin": "http://localhost:8888"})
    assert status == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:4566", "127.0.0.1.evil.example", "0.0.0.0"])
def test_a_foreign_host_is_refused_without_cors_allowance(backend, host):
    status, headers, _ = request(backend, headers={"Host": host})
    assert status == 403
    assert not any(name.startswith("access-control-allow") for name in headers)


@pytest.mark.parametrize("method", ["OPTIONS", "POST"])
def test_a_foreign_origin_is_refused_without_cors_allowance(backend, method):
    port = urlsplit(backend).port
    preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "x-amz-target"}
    for origin in ("https://evil.example", "null", "http://localhost.evil.example"):
        headers = {"Host": f"127.0.0.1:{port}", "Origin": origin, **(preflight if method == "OPTIONS" else {})}
        status, answered, _ = request(backend, method=method, headers=headers)
        assert status == 403, origin
        assert not any(name.startswith("access-control-allow") for name in answered), answered


def test_binding_beyond_loopback_needs_the_explicit_flag():
    port = free_port()
    result = subprocess.run(
        [sys.executable, "-m", "idemlab.embedded", "--host", "0.0.0.0", "--port", str(port)],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=settings.ROOT,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 2
    assert "not a loopback address" in result.stderr and "--allow-remote" in result.stderr
