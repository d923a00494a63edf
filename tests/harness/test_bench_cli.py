"""`python -m idemlab.bench --backend aws` measures AWS whatever $BACKEND says."""

from __future__ import annotations

from idemlab import clients, settings
from idemlab.bench.__main__ import options


def test_the_aws_bench_named_on_the_command_line_sends_every_client_to_aws(monkeypatch):
    """A learner who types `python -m idemlab.bench --backend aws` with no BACKEND in the
    shell: the strategy section's clients (idemlab.clients) must not go to the local port."""
    monkeypatch.delenv("BACKEND", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert options(["--quick", "--backend", "aws"]).backend == "aws"
    assert settings.backend() == "aws"
    assert clients.client("dynamodb").meta.endpoint_url == "https://dynamodb.eu-west-1.amazonaws.com"
