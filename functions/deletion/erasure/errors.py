"""Every way a deletion can fail, one class each.

Step Functions matches a failure by its class name (``errorType``): these names are what
``account_deletion.asl.json``'s ``Retry`` and ``Catch`` list. Renaming one means changing
the workflow too.
"""


class DeletionError(Exception):
    """Base class of every error raised by the account-deletion functions."""


class InvalidDeletionInputError(DeletionError):
    """The event is missing a field or carries a value that cannot be right; nothing was written."""


class IdempotencyKeyReusedError(InvalidDeletionInputError):
    """The same user and idempotency key were sent before with another payload; nothing was written."""


class NotYourRequestError(InvalidDeletionInputError):
    """A cancel named a request that deletes another user's account; nothing was changed."""


class SweepIncompleteError(DeletionError):
    """The sweeper could not handle some requests; it handled the others and published its count."""


class UnknownDeletionRequestError(DeletionError):
    """No deletion request with this id exists."""


class ClaimLostError(DeletionError):
    """A write carried a fencing token that is no longer current: a newer claim, a sweep or a cancel superseded it."""


class StepsNotFinishedError(DeletionError):
    """Completion was asked for while some steps have not recorded their progress."""


class UnknownRecoveryPointError(DeletionError):
    """Bug: a status or step name outside the closed set reached the workflow."""


class MalformedRequestError(DeletionError):
    """A stored deletion request lacks a field every request has (written by hand or by a bug)."""


class InjectedFaultError(DeletionError):
    """The faults table asked for an error at this step boundary (a lesson, not a bug)."""


class DeletionStoreUnavailableError(DeletionError):
    """DynamoDB, S3 or SQS refused a call for a reason other than a failed condition."""
