"""What installing the take-home plugin brings, and what it says when pytest is missing."""

from __future__ import annotations

import subprocess
import sys


def test_without_pytest_the_plugin_names_the_extra_to_install():
    # pytest hidden from this interpreter: `import pytest` fails as in an environment without it.
    hide = "import sys; sys.modules['pytest'] = None; import idemlab.testing.plugin"
    run = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert 'pip install "idemlab[testing]"' in run.stderr.splitlines()[-1], run.stderr
