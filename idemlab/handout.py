"""A participant's handout: what a clone on another machine needs to reach a stack the
instructor deployed, without its Terraform state.

`make workshop` writes one per participant (``.lab/handouts/<name>.json``); the participant
copies theirs to their own clone and runs `make join HANDOUT=<file>`. From then on every
`make` target and notebook of that clone talks to that stack: the handout names the backend,
the region, the endpoint (none on AWS) and the participant, and holds the stack's `lab`
outputs, which is all `lab.connect()` reads. It holds no secret: credentials stay with each
machine's own credential chain.

Why a handout and not a shared Terraform state (an S3 backend): a participant only uses the
stack, never plans or destroys it, so the state stays with the one person who may change it;
a handout needs no bucket, no lock table and no state read rights for thirty people, and
works the same on the emulators.

python -m idemlab.handout join <file>      this clone uses the handout's stack from now on
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from idemlab import settings

HANDOUTS_DIR = settings.STATE_DIR / "handouts"
# The handout's shape; a handout of another version is refused rather than half read.
VERSION = 1
# What every handout holds; "endpoint" is None on AWS.
FIELDS = ("version", "participant", "backend", "region", "endpoint", "outputs")
# What lab.connect() and the lessons need of the outputs, checked before anything is written.
REQUIRED_OUTPUTS = ("tables", "functions")


class HandoutError(ValueError):
    """A handout that cannot be joined; the message says what is wrong, and nothing was changed."""


def handout_for(participant: str, backend: str, outputs: dict) -> dict:
    """The handout of one participant's deployed stack (``outputs``: its `lab` output)."""
    return {
        "version": VERSION,
        "participant": participant,
        "backend": backend,
        "region": settings.region(),
        "endpoint": settings.endpoint_url(),
        "outputs": outputs,
    }


def write(handout: dict) -> Path:
    """``.lab/handouts/<participant>.json``, for the instructor to hand out."""
    HANDOUTS_DIR.mkdir(parents=True, exist_ok=True)
    path = HANDOUTS_DIR / f"{handout['participant']}.json"
    path.write_text(json.dumps(handout, indent=2, sort_keys=True) + "\n")
    return path


def read(path: Path) -> dict:
    """The handout at ``path``, checked field by field; HandoutError says what is wrong."""
    try:
        handout = json.loads(Path(path).read_text())
    except OSError as exc:
        raise HandoutError(f"cannot read the handout {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise HandoutError(f"{path} is not a handout (not JSON: {exc})") from exc
    if not isinstance(handout, dict) or sorted(handout) != sorted(FIELDS):
        raise HandoutError(f"{path} is not a handout: it must hold exactly {', '.join(FIELDS)}")
    if handout["version"] != VERSION:
        raise HandoutError(f"{path} is a version {handout['version']!r} handout; this lab reads version {VERSION}")
    try:
        settings.check_prefix(handout["participant"], "the handout's participant")
        settings.check_region(handout["region"], "the handout's region")
    except ValueError as exc:
        raise HandoutError(str(exc)) from exc
    if handout["backend"] not in settings.BACKENDS:
        raise HandoutError(f"the handout's backend {handout['backend']!r} is not one of {', '.join(settings.BACKENDS)}")
    if (handout["backend"] == "aws") != (handout["endpoint"] is None):
        raise HandoutError("a handout has an endpoint exactly when its backend is an emulator")
    outputs = handout["outputs"]
    if not isinstance(outputs, dict) or any(not isinstance(outputs.get(key), dict) for key in REQUIRED_OUTPUTS):
        raise HandoutError(f"the handout's outputs lack {' and '.join(REQUIRED_OUTPUTS)}: not a stack's `lab` output")
    return handout


def join(path: Path) -> dict:
    """Make this clone use the handout's stack: its backend, region, endpoint and participant,
    and its outputs where `lab.connect()` reads them. Nothing is written unless the whole
    handout is sound and agrees with the region this clone already has."""
    from idemlab import stack  # stack imports settings, as this module does

    handout = read(path)
    if settings.REGION_FILE.exists() and settings.REGION_FILE.read_text().strip() != handout["region"]:
        raise HandoutError(
            f"this clone's region is {settings.REGION_FILE.read_text().strip()} (.lab/{settings.REGION_FILE.name}), "
            f"the handout's {handout['region']}: join from a fresh clone"
        )
    settings.STATE_DIR.mkdir(parents=True, exist_ok=True)
    settings.JOINED_FILE.write_text(json.dumps(handout, indent=2, sort_keys=True) + "\n")
    settings.BACKEND_FILE.write_text(handout["backend"] + "\n")
    settings.set_region(handout["region"])
    settings.remember_participant(handout["participant"])
    stack.save_outputs(stack.stack_name(handout["participant"], handout["backend"]), handout["outputs"])
    return handout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m idemlab.handout", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["join"])
    parser.add_argument("file", type=Path, help="the handout the instructor gave you")
    args = parser.parse_args(argv)
    try:
        handout = join(args.file)
    except HandoutError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    where = handout["endpoint"] or f"AWS {handout['region']}"
    print(f"joined {handout['participant']}'s stack on {handout['backend']} at {where}: `make lab` opens the notebooks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
