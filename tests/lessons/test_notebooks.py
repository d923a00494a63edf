"""Every notebook runs top to bottom, headless, against the deployed stack.

The notebooks assert their own teaching outcomes (a duplicate row, a double charge);
a failed assertion fails the cell, and the cell fails this test.
"""

import json
import os
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from idemlab import settings

NOTEBOOKS = sorted((settings.ROOT / "notebooks").glob("*.ipynb"))
# What a learner's shell has: no AWS variables at all, only the lab's own port (the
# test backend runs on a free port rather than 4566). Credentials, region and endpoint
# must come from the harness, or a notebook would work in CI and fail for learners.
LEARNER_DROPS = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AWS_ENDPOINT_URL",
)
# Notebooks that measure on an embedded backend they start themselves, whatever backend the
# learner chose. They run here for a learner on LocalStack whose endpoint records every
# request and refuses it: they must send it none, not even a request for the embedded
# backend's request counter (LocalStack and AWS would answer 404 or refuse).
OWN_BACKEND = ("05_cost.ipynb", "08_capstone.ipynb")
# A learner's "Run all" leaves the answer keys alone (the cell tagged `parameters` sets
# SHOW_ANSWERS = False); CI runs and asserts them, as papermill injects parameters: a cell
# after the tagged one that sets them again.
PARAMETERS = {"SHOW_ANSWERS": True}
ANSWERS_NOT_RUN = "answer key not run"


def learner_environment() -> dict:
    return {name: value for name, value in os.environ.items() if name not in LEARNER_DROPS}


class Recorder(BaseHTTPRequestHandler):
    """The learner's endpoint for an OWN_BACKEND notebook: records every request and refuses it."""

    def _refuse(self):
        self.server.seen.append(f"{self.command} {self.path}")
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _refuse

    def log_message(self, *args):  # quiet
        pass


def recording_endpoint() -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    server.seen = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def committed(path: Path) -> dict:
    shown = subprocess.run(
        ["git", "show", f"HEAD:{path.relative_to(settings.ROOT)}"], capture_output=True, text=True, cwd=settings.ROOT
    )
    return json.loads(shown.stdout) if shown.returncode == 0 else json.loads(path.read_text())


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no notebook"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_without_outputs(path):
    cells = [cell for cell in committed(path)["cells"] if cell["cell_type"] == "code"]
    dirty = [n for n, cell in enumerate(cells) if cell.get("outputs") or cell.get("execution_count")]
    assert not dirty, f"{path.name}: code cells {dirty} have outputs; clear them before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_cell_ids_are_unique(path):
    """nbformat renames a repeated id when it reads the notebook, so a link to that cell breaks."""
    ids = [cell.get("id") for cell in committed(path)["cells"]]
    repeated = sorted({cell_id for cell_id in ids if ids.count(cell_id) > 1})
    assert not repeated, f"{path.name}: cell ids used more than once: {repeated}"


def with_parameters(notebook, parameters: dict):
    """`notebook` with a cell setting `parameters` right after its cell tagged `parameters`
    (unchanged when it has none)."""
    tagged = [n for n, cell in enumerate(notebook.cells) if "parameters" in cell.metadata.get("tags", [])]
    if tagged:
        source = "\n".join(f"{name} = {value!r}" for name, value in parameters.items())
        injected = nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]})
        notebook.cells.insert(tagged[0] + 1, injected)
    return notebook


def printed(notebook) -> str:
    """Everything the notebook's cells printed."""
    return "\n".join(
        output.get("text", "") for cell in notebook.cells for output in cell.get("outputs", []) if output.get("name")
    )


def execute(path: Path, environment: dict, record_property) -> None:
    """Run the notebook top to bottom in a fresh kernel, its answer keys too; a failed cell raises."""
    notebook = with_parameters(nbformat.read(path, as_version=4), PARAMETERS)
    client = NotebookClient(
        notebook,
        # No cell deadline: a cell ends when its work does. A loaded CI machine ran notebook
        # 05's benchmark cell past a 300 s one (its whole run takes 135 s on a quiet one);
        # the test's own timeout is the guard against a hung kernel.
        timeout=None,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    started = time.monotonic()
    client.execute(env=environment)
    elapsed = time.monotonic() - started
    pictures = sum(
        "image/png" in output.get("data", {}) for cell in notebook.cells for output in cell.get("outputs", [])
    )
    record_property("seconds", round(elapsed, 1))
    record_property("pictures", pictures)
    print(f"{path.name} ran in {elapsed:.1f} s and drew {pictures} pictures")
    _remember_run(path.name, round(elapsed, 1), pictures)
    assert ANSWERS_NOT_RUN not in printed(notebook), f"{path.name}: an answer key was skipped under CI's parameters"


RUNS_FILE = settings.ROOT / ".lab" / "notebook-runs.json"


def _remember_run(name: str, seconds: float, pictures: int) -> None:
    """What each notebook's last run took and drew, for the course's time table (merged by
    name; several workers may write: each rewrites the whole file from what it read)."""
    try:
        runs = json.loads(RUNS_FILE.read_text())
    except (OSError, ValueError):
        runs = {}
    runs[name] = {"seconds": seconds, "pictures": pictures}
    RUNS_FILE.parent.mkdir(exist_ok=True)
    RUNS_FILE.write_text(json.dumps(runs, indent=1, sort_keys=True))


@pytest.mark.timeout(1800)  # a hung kernel only: notebooks run 2-3 times slower on a loaded CI machine
@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.name not in OWN_BACKEND], ids=lambda p: p.name)
def test_notebook_runs_headless_and_asserts_its_outcomes(stack, path, record_property):
    execute(path, learner_environment(), record_property)


@pytest.mark.timeout(1800)  # a hung kernel only: notebooks run 2-3 times slower on a loaded CI machine
@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.name in OWN_BACKEND], ids=lambda p: p.name)
def test_notebook_on_a_backend_of_its_own_runs_and_leaves_the_learners_alone(path, record_property):
    """No `stack`: such a notebook needs nothing deployed, so it never waits for the deploy."""
    recorder = recording_endpoint()
    url = f"http://127.0.0.1:{recorder.server_address[1]}"
    try:
        execute(
            path,
            learner_environment() | {"BACKEND": "localstack", "AWS_ENDPOINT_URL": url, "AWS_REGION": "eu-west-1"},
            record_property,
        )
    finally:
        recorder.shutdown()
    assert recorder.seen == [], f"{path.name} called the learner's endpoint: {recorder.seen[:5]}"
