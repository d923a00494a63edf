"""Step 3: delete the user's files (every object under ``<user_id>/``), page by page.

One listing page (up to 1000 keys) is deleted before the next is listed, and each page
renews the claim's lease under its token. Deleting what is already gone succeeds, so a
retry after a crash is harmless, and what a crashed invocation deleted stays deleted:
the next one lists only what is left.
"""

from __future__ import annotations

from botocore.exceptions import ClientError

from erasure import claims, config, state
from erasure.errors import DeletionStoreUnavailableError
from erasure.steps import run_step, time_is_short
from shared import clients, settings

STEP = "delete_files"
OBJECTS_PER_DELETE = 1000  # DeleteObjects' limit, and ListObjectsV2's page


def handler(event, context):
    return run_step(STEP, event, context, delete_files)


def user_prefix(user_id: str) -> str:
    # The slash keeps user "u1" from matching the files of user "u10".
    return f"{user_id}/"


def delete_files(claim: claims.Claim, request: state.Request, context=None) -> bool:
    """True once no file is left; False when it stopped for time."""
    s3 = clients.client("s3")
    bucket = settings.required("USER_FILES_BUCKET")
    table = clients.dynamodb_table("deletion_requests")
    try:
        while True:
            listed = s3.list_objects_v2(Bucket=bucket, Prefix=user_prefix(claim.user_id), MaxKeys=OBJECTS_PER_DELETE)
            keys = [obj["Key"] for obj in listed.get("Contents", [])]
            if not keys:
                return True
            done = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True})
            if done.get("Errors"):
                first = done["Errors"][0]
                raise DeletionStoreUnavailableError(
                    f"{STEP}: {len(done['Errors'])} objects not deleted, first {first.get('Key')}: {first.get('Code')}"
                )
            claims.renew_lease(table, claim, config.lease_seconds())  # ClaimLostError stops a superseded worker here
            if time_is_short(context):
                return False
    except ClientError as exc:
        raise DeletionStoreUnavailableError(
            f"{STEP} for {claim.deletion_request_id}: {exc.response['Error'].get('Code')}"
        ) from exc
