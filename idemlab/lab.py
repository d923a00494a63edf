"""The first cell of every notebook: which backend, which endpoint, what is deployed.

    from idemlab import lab
    stack = lab.connect()
"""

from __future__ import annotations

from idemlab import clients, settings, stack


def connect(prefix: str = "lab") -> dict:
    """Print where the lab runs and what is deployed there; return the `lab` outputs."""
    chosen = settings.backend()
    where = clients.endpoint() or f"AWS {settings.region()}"  # on an emulator, dummy keys from here on
    try:
        outputs = stack.outputs(prefix=prefix, backend=chosen)
    except stack.StackError as exc:  # the message names the file it looked for
        raise stack.StackError(f"no '{prefix}' stack on {chosen} ({where}): run `make up deploy` ({exc})") from exc
    print(f"Backend: {chosen} at {where}")
    for kind in ("tables", "functions", "state_machines", "queues", "buckets"):
        if names := outputs.get(kind):
            print(f"  {kind:15} {len(names):2}: {', '.join(sorted(names))}")
    return outputs
