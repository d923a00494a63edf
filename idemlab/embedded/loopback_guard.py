"""Keep web pages away from a server that runs uploaded code on the learner's machine.

moto's server answers any request that reaches its port. It echoes any `Origin` back in
its CORS answers, so a page on any web site can call it from the learner's browser
(cross-site requests), and it ignores `Host`, so a site whose name is re-pointed at
127.0.0.1 can read the answers too (DNS rebinding): a web page could create a Lambda
function here and run its code on the laptop. So server.py's front door answers 403,
before moto sees the request and without any CORS allowance, when its `Host` is not a
loopback name (`localhost`, `*.localhost`, `127.x.x.x`, `[::1]`, any port: a rebinding
site sends its own name), or when it has an `Origin` that is not a loopback one (browsers
send `Origin` on cross-site and CORS requests; boto3, Terraform, the Lambda workers and
Step Functions send none).

`--allow-remote` (see server.py) serves other machines on purpose: the `Host` check is
then off (they reach the server under its network name), the `Origin` check stays.
"""

from __future__ import annotations

import functools
import ipaddress
from urllib.parse import urlsplit

FORBIDDEN = {"message": "Forbidden: the embedded backend answers only loopback clients"}


@functools.lru_cache(maxsize=256)  # a pure function of the text, asked on every request
def is_loopback_name(host: str, port: bool = False) -> bool:
    """Whether a host name names loopback; with `port`, a `Host` value (`127.0.0.1:4566`, `[::1]:4566`)."""
    host = host.strip().lower()
    if host.startswith("[") and (port or host.endswith("]")):
        host = host[1:].split("]", 1)[0]
    elif port and host.count(":") == 1:
        host = host.rsplit(":", 1)[0]
    host = host.rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):  # RFC 6761: always loopback
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def refusal(environ: dict, check_host: bool = True) -> str | None:
    """Why this request must be refused, or None."""
    host, origin = environ.get("HTTP_HOST"), environ.get("HTTP_ORIGIN")
    if check_host and host is not None and not is_loopback_name(host, port=True):
        return f"Host {host!r} is not a loopback name"
    parts = urlsplit(origin) if origin is not None else None
    if parts and (parts.scheme not in ("http", "https") or not is_loopback_name(parts.hostname or "")):
        return f"Origin {origin!r} is not a loopback origin"
    return None
