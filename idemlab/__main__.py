"""The lab's command line (what the Makefile calls).

python -m idemlab up | down | status       the selected backend
python -m idemlab deploy | plan | destroy  the Terraform stack on it (deploy, plan: --lessons vehicles,checkout)
python -m idemlab outputs                  the `lab` map, as JSON
python -m idemlab region [name]            set this clone's region once (every target reads it); show it
python -m idemlab join <handout>           use the stack a handout names (idemlab/handout.py)
"""

from __future__ import annotations

import argparse
import json
import sys

from idemlab import backend, handout, interrupts, lab, settings, stack


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m idemlab", description=__doc__.splitlines()[0])
    parser.add_argument(
        "command", choices=["up", "down", "status", "deploy", "plan", "destroy", "outputs", "region", "join"]
    )
    parser.add_argument("value", nargs="?", default=None, help="region: the region name; join: the handout file")
    parser.add_argument(
        "--prefix",
        default=None,
        help="the participant: name prefix of the stack (default: $PARTICIPANT, else the one deployed last, else lab)",
    )
    parser.add_argument(
        "--lessons",
        default=None,
        help="deploy, plan: the lessons to provision, by slug (vehicles,checkout); 'all' for every one "
        "(default: the ones the stack was deployed with, else all)",
    )
    args = parser.parse_args(argv)
    lessons = stack.parse_lessons(args.lessons)
    try:
        if args.command == "region":
            if args.value:
                settings.set_region(args.value)
            print(f"region {settings.region()}")
        elif args.command == "join":
            if not args.value:
                raise ValueError("join needs the handout: make join HANDOUT=<file>")
            return handout.main(["join", args.value])
        elif args.command == "deploy" and settings.joined():
            # A joined clone has nothing to apply: it checks that the handout's stack answers.
            lab.connect()
        elif args.command in ("up", "down", "status"):
            getattr(backend, args.command)()
        elif args.command in ("deploy", "destroy"):
            prefix = settings.participant() if args.prefix is None else settings.check_prefix(args.prefix)
            with interrupts.stopping_safely():  # Ctrl-C: Terraform stops on its own; we say what it left
                if args.command == "deploy":
                    stack.deploy(prefix=prefix, lessons=lessons)
                else:
                    stack.destroy(prefix=prefix)
            if args.command == "deploy":  # the notebooks opened next connect to this participant's stack
                settings.remember_participant(prefix)
            print(f"{args.command}ed '{prefix}' on {settings.backend()}")  # deploy says how long its apply took
        elif args.command == "plan":
            print(stack.plan(prefix=args.prefix, lessons=lessons)[1])
        else:
            print(json.dumps(stack.outputs(prefix=args.prefix), indent=2, sort_keys=True))
    except interrupts.Interrupted as exc:
        print(f"interrupted: {exc}", file=sys.stderr)
        return 130  # as a shell reports a command ended by SIGINT
    except (backend.BackendError, stack.StackError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
