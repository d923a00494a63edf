"""Step 3: delete the user's files (every object under ``<user_id>/``).

Deleting what is already gone succeeds, so a retry after a crash is harmless.
"""

from __future__ import annotations

from botocore.exceptions import ClientError

import deletion_config as config
import deletion_state as state
from deletion_errors import DeletionStoreUnavailable
from deletion_steps import run_step

STEP = "delete_files"
OBJECTS_PER_DELETE = 1000  # DeleteObjects' limit


def handler(event, context):
    return run_step(STEP, event, context, delete_files)


def user_prefix(user_id: str) -> str:
    # The slash keeps user "u1" from matching the files of user "u10".
    return f"{user_id}/"


def delete_files(claim: state.Claim) -> None:
    s3 = config.client("s3")
    bucket = config.required("USER_FILES_BUCKET")
    try:
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=user_prefix(claim.user_id))
        keys = [obj["Key"] for page in pages for obj in page.get("Contents", [])]
        for i in range(0, len(keys), OBJECTS_PER_DELETE):
            chunk = keys[i : i + OBJECTS_PER_DELETE]
            done = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True})
            if done.get("Errors"):
                first = done["Errors"][0]
                raise DeletionStoreUnavailable(f"{STEP}: {len(done['Errors'])} objects not deleted, first {first.get('Key')}: {first.get('Code')}")
    except ClientError as exc:
        raise DeletionStoreUnavailable(f"{STEP} for {claim.deletion_request_id}: {exc.response['Error'].get('Code')}") from exc
