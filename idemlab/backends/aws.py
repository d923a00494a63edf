"""AWS as the backend: nothing to start or stop, only credentials to check."""

from __future__ import annotations

from idemlab import settings
from idemlab.backends import BackendError


def up() -> str:
    from idemlab import clients  # boto3 only when the backend is AWS

    try:
        identity = clients.client("sts").get_caller_identity()
    except Exception as exc:  # no or expired credentials: say so in one line
        raise BackendError(f"AWS credentials do not work ({exc}); configure them (aws configure, AWS_PROFILE)") from exc
    return f"AWS account {identity['Account']} in {settings.region()} (nothing to start)"
