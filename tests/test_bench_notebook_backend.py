"""Notebook 05 measures on an embedded backend it starts itself, whatever backend the
learner chose, and never asks the learner's endpoint for a request counter (only the
embedded backend has one: LocalStack and AWS would answer 404 or refuse)."""

from __future__ import annotations

import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from idemlab.bench import cost_of_idempotency, strategy_report

pytestmark = [pytest.mark.stack, pytest.mark.timeout(600)]


class Recorder(BaseHTTPRequestHandler):
    """The learner's endpoint: records every request it gets and refuses it."""

    seen: list[str] = []

    def _refuse(self):
        Recorder.seen.append(f"{self.command} {self.path}")
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = do_PUT = do_DELETE = _refuse

    def log_message(self, *args):  # quiet
        pass


@pytest.fixture
def learner_on_localstack(monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    Recorder.seen = []
    monkeypatch.setenv("BACKEND", "localstack")
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    yield url
    server.shutdown()


def test_the_short_run_measures_on_its_own_embedded_backend_and_leaves_the_learners_alone(learner_on_localstack, tmp_path):
    result = cost_of_idempotency.short_run(chart_path=tmp_path / "chart.png")
    assert Recorder.seen == [], f"the learner's endpoint was called: {Recorder.seen[:5]}"
    assert strategy_report.unexplained(result) == []
    assert result["strategies"]["vehicle_idempotent"]["first"]["counted"] == {"PutItem": 1}
    # The harness points at the learner's backend again afterwards.
    assert (os.environ["BACKEND"], os.environ["AWS_ENDPOINT_URL"], os.environ["AWS_REGION"]) == ("localstack", learner_on_localstack, "eu-west-1")
