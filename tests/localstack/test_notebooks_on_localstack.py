"""Every notebook, headless, against the stack deployed on LocalStack, in a learner's
environment (tests/lessons/test_notebooks.py runs the same notebooks on the embedded backend).

The notebooks that start a backend of their own (OWN_BACKEND: 05's benchmark, 08's checker)
are not run here: they never call the stage's endpoint (the embedded stage runs them against
an endpoint that records every call and asserts it saw none), so a run here was the same run
again, 232 s of this stage in one measured run."""

from __future__ import annotations

import pytest

from idemlab import settings
from lessons.test_notebooks import NOTEBOOKS, OWN_BACKEND, execute, learner_environment

# Notebooks LocalStack cannot run yet, with the reason: a strict xfail says when it can.
# LocalStack 4.14.0 Community has no Lambda durable functions (LocalStack offers them in its
# paid edition only), and the lab does not yet run AWS's local engine beside LocalStack
# (issue 39): notebook 09's durable functions fail on their first invocation there.
CANNOT_RUN = {"09_durable.ipynb": "LocalStack 4.14.0 Community has no Lambda durable functions"}


def _marked(path):
    if path.name in CANNOT_RUN:
        return pytest.param(path, marks=pytest.mark.xfail(strict=True, reason=CANNOT_RUN[path.name]))
    return path


@pytest.mark.timeout(2400)  # a hung kernel only: notebook 04 alone ran 376 s on a quiet machine
@pytest.mark.parametrize(
    "path", [_marked(path) for path in NOTEBOOKS if path.name not in OWN_BACKEND], ids=lambda p: p.name
)
def test_notebook_runs_on_localstack(deployed, path, record_property):
    environment = learner_environment() | {"BACKEND": "localstack", "LAB_PORT": str(settings.port())}
    execute(path, environment, record_property)
