"""The lab's command line (what the Makefile calls).

python -m idemlab up | down | status       the selected backend
python -m idemlab deploy | plan | destroy  the Terraform stack on it
python -m idemlab outputs                  the `lab` map, as JSON
"""

from __future__ import annotations

import argparse
import json
import sys

from idemlab import backend, settings, stack


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m idemlab", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["up", "down", "status", "deploy", "plan", "destroy", "outputs"])
    parser.add_argument(
        "--prefix",
        default=None,
        help="the participant: name prefix of the stack (default: $PARTICIPANT, else the one deployed last, else lab)",
    )
    args = parser.parse_args(argv)
    try:
        if args.command in ("up", "down", "status"):
            getattr(backend, args.command)()
        elif args.command in ("deploy", "destroy"):
            prefix = settings.participant() if args.prefix is None else settings.check_prefix(args.prefix)
            getattr(stack, args.command)(prefix=prefix)
            if args.command == "deploy":  # the notebooks opened next connect to this participant's stack
                settings.remember_participant(prefix)
            print(f"{args.command}ed '{prefix}' on {settings.backend()}")  # deploy says how long its apply took
        elif args.command == "plan":
            print(stack.plan(prefix=args.prefix)[1])
        else:
            print(json.dumps(stack.outputs(prefix=args.prefix), indent=2, sort_keys=True))
    except (backend.BackendError, stack.StackError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
