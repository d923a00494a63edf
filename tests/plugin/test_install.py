"""What installing the take-home plugin brings, and what it says when pytest is missing; the
wheel a release would publish, checked and installed on each Python requires-python accepts."""

from __future__ import annotations

import email.parser
import subprocess
import sys
import zipfile

import pytest

from idemlab import settings
from support.wheel import build_distributions, pythons, supported

UV = settings.STATE_DIR / "uv" / "bin" / "uv"  # where `make install` puts it


def test_without_pytest_the_plugin_names_the_extra_to_install():
    # pytest hidden from this interpreter: `import pytest` fails as in an environment without it.
    hide = "import sys; sys.modules['pytest'] = None; import idemlab.testing.plugin"
    run = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert 'pip install "idemlab[testing]"' in run.stderr.splitlines()[-1], run.stderr


# One handler, delivered once by the installed plugin: the backend's server and a Lambda worker
# run on the venv's Python, so each must import and work there.
SMOKE = """
import pathlib, sys, tempfile

from idemlab.testing import Backend, Handler, Lab

code = pathlib.Path(tempfile.mkdtemp())
(code / "hello.py").write_text("import sys\\ndef handler(event, context):\\n    return [event['n'] + 1, list(sys.version_info[:2])]\\n")
with Backend() as backend:
    delivery = Lab(backend).deliver(Handler.module("hello.handler", code_root=code), {"n": 41}, copies=1)
print("RESULT", delivery.copies[0].result, delivery.copies[0].error)
"""


def test_the_sdist_and_wheel_build_and_pass_twine_check(tmp_path):
    built = build_distributions(tmp_path)
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(built["sdist"]), str(built["wheel"])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == 2, checked.stdout

    with zipfile.ZipFile(built["wheel"]) as wheel:
        names = set(wheel.namelist())
        info = next(name for name in names if name.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(wheel.read(info).decode())
        entry_points = wheel.read(info.replace("METADATA", "entry_points.txt")).decode()
    assert "idemlab/testing/_bootstrap.py" in names  # zipped next to every handler at deploy time
    assert not any(name.startswith(("tests/", "functions/", "notebooks/")) for name in names)
    assert metadata["Requires-Python"] == ">=3.10"
    assert "idemlab = idemlab.testing.plugin" in entry_points  # how pytest finds the plugin
    testing = [req for req in metadata.get_all("Requires-Dist") if 'extra == "testing"' in req]
    assert [req.split(";")[0].strip() for req in testing] == ["pytest==9.2.0"], testing


# Four venvs, four backends: about 100 s on an idle 2-core machine; room for a loaded one.
@pytest.mark.timeout(1200)
def test_the_wheel_installs_and_delivers_on_every_supported_python(tmp_path):
    found = pythons()
    missing = [f"{major}.{minor}" for major, minor in supported() if (major, minor) not in found]
    assert not missing, f"Python {', '.join(missing)} not found (on PATH or under ~/.pyenv/versions): install it"
    wheel = build_distributions(tmp_path)["wheel"]
    assert UV.exists(), f"uv is not installed at {UV}; run `make install`"
    for (major, minor), python in sorted(found.items()):
        venv = tmp_path / f"venv-{major}.{minor}"
        made = subprocess.run(
            [str(UV), "venv", "--quiet", "--python", python, str(venv)], capture_output=True, text=True
        )
        assert made.returncode == 0, made.stderr
        installed = subprocess.run(
            [str(UV), "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), f"{wheel}[testing]"],
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert installed.returncode == 0, f"Python {major}.{minor}: {installed.stdout}{installed.stderr}"
        # Run outside the clone, so `idemlab` can only come from the installed wheel.
        ran = subprocess.run(
            [str(venv / "bin" / "python"), "-c", SMOKE], capture_output=True, text=True, timeout=300, cwd=tmp_path
        )
        assert ran.returncode == 0, f"Python {major}.{minor}: {ran.stdout}{ran.stderr}"
        assert f"RESULT [42, [{major}, {minor}]] None" in ran.stdout, f"Python {major}.{minor}: {ran.stdout}"
