"""Build one deployable zip per lesson: ``python -m idemlab.build``.

Each folder under ``functions/`` becomes ``build/<folder>.zip`` holding the folder's
files at the zip root, the ``shared`` package every lesson imports (``functions/shared/``:
settings, clients, the fault contract), and Powertools and its pure-Python dependencies,
copied from the installed packages (LocalStack community does not apply Lambda layers).

The zips are deterministic (sorted entries, fixed timestamps and permissions), so the
same sources give the same ``source_code_hash`` and a second ``terraform plan`` is empty.
They are packed again only when an input changed: each output folder keeps the inputs'
fingerprint (every file's path, size and modification time, and this module's own code)
beside the zips it made, as make would judge them.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path, PurePath

from idemlab import settings

FUNCTIONS_DIR = settings.ROOT / "functions"
# The package every lesson's code imports (``from shared import faults``): a folder beside the
# lessons' folders, not a lesson, packed into each lesson's zip as ``shared/``.
SHARED = "shared"
SHARED_DIR = FUNCTIONS_DIR / SHARED
# Powertools and its run-time imports; not boto3: every Lambda Python runtime (and LocalStack's) has it.
BUNDLED_DISTRIBUTIONS = ("aws-lambda-powertools", "jmespath", "typing-extensions")
# The earliest timestamp a zip entry can hold; any fixed value makes the bytes repeatable.
FIXED_TIMESTAMP = (1980, 1, 1, 0, 0, 0)
# Kept in the output folder beside the zips: the fingerprint of the inputs they were packed from.
FINGERPRINT_FILE = ".sources.json"
# ".." is in a distribution's entries that live outside site-packages (../../bin/script): not importable code.
SKIPPED_PARTS = {"__pycache__", ".pytest_cache", "tests", ".."}


class BuildError(Exception):
    """The functions cannot be packaged (missing folder, package or file)."""


@dataclass(frozen=True)
class Artifact:
    """One lesson's zip, as a build left it."""

    lesson: str  # the functions/ folder it was packed from (the lesson's slug)
    path: Path
    sha256_base64: str  # what Terraform's filebase64sha256() returns for it
    changed: bool  # written by this build (False: the zip on disk was already current)


def _wanted(relative: PurePath) -> bool:
    return not set(relative.parts) & SKIPPED_PARTS and relative.suffix not in (".pyc", ".pyo")


def source_files(folder: Path) -> dict[str, Path]:
    """The lab's files of a lesson's zip, keyed by their path inside it: the folder's own,
    and the ``shared`` package beside it (when there is one), under ``shared/``."""
    own = _files(folder)
    shared_dir = folder.parent / SHARED
    if not shared_dir.is_dir() or shared_dir.resolve() == folder.resolve():
        return own
    if clashes := sorted(name for name in own if PurePath(name).parts[0] == SHARED):
        raise BuildError(f"{folder.name}: files shadow the shared package: {', '.join(clashes)}")
    return {**{f"{SHARED}/{name}": path for name, path in _files(shared_dir).items()}, **own}


def _files(folder: Path) -> dict[str, Path]:
    return {
        path.relative_to(folder).as_posix(): path
        for path in folder.rglob("*")
        if path.is_file() and _wanted(path.relative_to(folder))
    }


def bundled_files() -> dict[str, Path]:
    """Files of the bundled distributions, keyed by their path relative to site-packages."""
    files = {}
    for name in BUNDLED_DISTRIBUTIONS:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError as exc:
            raise BuildError(f"{name} is not installed; install the project (pip install -e .)") from exc
        for relative in dist.files or ():  # paths relative to site-packages
            # Of the metadata only METADATA and LICENSE: the rest (RECORD, INSTALLER...) can differ between installs.
            record = relative.parts[0].endswith(".dist-info") and relative.name not in ("METADATA", "LICENSE")
            if record or not _wanted(relative):
                continue
            path = Path(dist.locate_file(relative))
            if path.is_file():
                files[str(relative)] = path
    return files


def zip_bytes(files: dict[str, Path]) -> bytes:
    """A zip of ``files`` (name in the zip -> file), the same bytes for the same contents."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=FIXED_TIMESTAMP)
            info.external_attr = 0o644 << 16  # rw-r--r-- whatever the file's mode on this machine
            archive.writestr(info, files[name].read_bytes(), zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


def lessons(functions_dir: Path = FUNCTIONS_DIR) -> list[str]:
    if not functions_dir.is_dir():
        raise BuildError(f"no functions folder at {functions_dir}")
    return sorted(
        p.name for p in functions_dir.iterdir() if p.is_dir() and not p.name.startswith((".", "_")) and p.name != SHARED
    )


def write_if_changed(target: Path, data: bytes) -> bool:
    """Write ``data`` unless the file holds it already (rewriting identical bytes would only
    disturb timestamps for make); True when written. Through a temporary file of its own and
    an atomic rename: runs at the same time (two deploys, a test) never leave or read half a file."""
    if target.exists() and target.read_bytes() == data:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.", delete=False) as partial:
        partial.write(data)
    Path(partial.name).replace(target)
    return True


def fingerprint(sources: dict[str, dict[str, Path]], bundle: dict[str, Path]) -> str:
    """A digest of every input's path, size and modification time, and of this module's code
    (how the inputs are packed): the same digest, the same zips."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for group, files in sorted({**sources, "": bundle}.items()):
        for name, path in sorted(files.items()):
            status = path.stat()
            digest.update(f"{group}/{name}\0{status.st_size}\0{status.st_mtime_ns}\0".encode())
    return digest.hexdigest()


def _unchanged(out_dir: Path, names: list[str], digest: str) -> list[Artifact] | None:
    """The artifacts already in ``out_dir`` when they were packed from inputs with this
    digest and each zip still holds the bytes recorded then; None otherwise."""
    try:
        recorded = json.loads((out_dir / FINGERPRINT_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(recorded, dict) or recorded.get("inputs") != digest or sorted(recorded.get("zips", {})) != names:
        return None
    artifacts = []
    for name in names:
        path = out_dir / f"{name}.zip"
        if not path.exists():
            return None
        sha = base64.b64encode(hashlib.sha256(path.read_bytes()).digest()).decode()
        if sha != recorded["zips"][name]:  # changed since (by hand, or a half-finished run): pack again
            return None
        artifacts.append(Artifact(name, path, sha, False))
    return artifacts


def build_all(functions_dir: Path = FUNCTIONS_DIR, out_dir: Path = settings.BUILD_DIR) -> list[Artifact]:
    """Every lesson's zip, written where its bytes changed: none unless every lesson packs.
    Inputs unchanged since the last build into ``out_dir``: its zips, not packed again."""
    if not (names := lessons(functions_dir)):
        raise BuildError(f"no lesson folders under {functions_dir}")
    zips, bundle = {}, bundled_files()
    sources = {name: source_files(functions_dir / name) for name in names}
    digest = fingerprint(sources, bundle)
    if (kept := _unchanged(out_dir, names, digest)) is not None:
        return kept
    for name in names:
        own = sources[name]
        if not any(file.endswith(".py") for file in _files(functions_dir / name)):
            raise BuildError(f"{name}: no .py files to package")
        if clashes := sorted(set(own) & set(bundle)):
            raise BuildError(f"{name}: files shadow bundled packages: {', '.join(clashes)}")
        zips[name] = zip_bytes({**bundle, **own})
    artifacts = [
        Artifact(
            name,
            out_dir / f"{name}.zip",
            base64.b64encode(hashlib.sha256(data).digest()).decode(),
            write_if_changed(out_dir / f"{name}.zip", data),
        )
        for name, data in zips.items()
    ]
    # Written after the zips, so a run stopped half way leaves no fingerprint that vouches for them.
    recorded = {"inputs": digest, "zips": {artifact.lesson: artifact.sha256_base64 for artifact in artifacts}}
    write_if_changed(out_dir / FINGERPRINT_FILE, json.dumps(recorded, sort_keys=True).encode())
    return artifacts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--functions", type=Path, default=FUNCTIONS_DIR, help="folder of lesson folders")
    parser.add_argument("--out", type=Path, default=settings.BUILD_DIR, help="where the zips go")
    args = parser.parse_args(argv)
    try:
        artifacts = build_all(args.functions, args.out)
    except BuildError as exc:
        print(f"build failed: {exc}", file=sys.stderr)
        return 1
    for artifact in artifacts:
        print(f"{artifact.path.name}: {artifact.sha256_base64} ({'written' if artifact.changed else 'unchanged'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
