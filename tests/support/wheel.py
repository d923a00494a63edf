"""The idemlab wheel as a release would make it (`python -m build`), and the Pythons it must
install on: what tests/plugin/test_install.py checks and tests/plugin/test_example.py installs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# What the distribution is made of: the package and its metadata, nothing of the lab around it
# (a copy, so the build's build/ and egg-info folders never land in the clone).
PACKAGE_FILES = ("pyproject.toml", "README.md", "idemlab")
# The oldest Python pyproject.toml's requires-python accepts: the one the take-home example runs on.
OLDEST_PYTHON = (3, 10)
NEWEST_PYTHON = (3, 13)


def build_distributions(workdir: Path) -> dict[str, Path]:
    """`python -m build` on a copy of the package: the sdist, then the wheel built from it
    (so a file the sdist leaves out is missing from the wheel too). {"sdist": ..., "wheel": ...}."""
    source = workdir / "idemlab-src"
    source.mkdir()
    for name in PACKAGE_FILES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(REPO / name, source / name)
    dist = workdir / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, f"python -m build failed:\n{built.stdout[-4000:]}\n{built.stderr[-4000:]}"
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, f"expected one wheel and one sdist in {sorted(dist.iterdir())}"
    return {"sdist": sdists[0], "wheel": wheels[0]}


def _version(python: str) -> tuple[int, int] | None:
    """The interpreter's (major, minor), or None where it does not run (a pyenv shim for a
    version pyenv has not selected refuses to)."""
    try:
        ran = subprocess.run(
            [python, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True, text=True, timeout=30
        )
    except OSError:
        return None
    if ran.returncode != 0:
        return None
    major, minor = ran.stdout.split()
    return int(major), int(minor)


def pythons() -> dict[tuple[int, int], str]:
    """The Pythons from OLDEST_PYTHON to NEWEST_PYTHON on this machine, by version: from PATH, and
    pyenv's installed versions (their real binaries, not the shims)."""
    candidates = [shutil.which(f"python{major}.{minor}") for major, minor in supported()]
    pyenv = Path.home() / ".pyenv" / "versions"
    if pyenv.is_dir():
        candidates += [str(path) for path in sorted(pyenv.glob("3.*/bin/python3"))]
    found: dict[tuple[int, int], str] = {}
    for candidate in candidates:
        if candidate is None:
            continue
        version = _version(candidate)
        if version in supported() and version not in found:
            found[version] = candidate
    return found


def supported() -> list[tuple[int, int]]:
    return [(3, minor) for minor in range(OLDEST_PYTHON[1], NEWEST_PYTHON[1] + 1)]
