"""Every way a registration can fail, defined once.

Step Functions names a Lambda failure after the exception class (``errorType``), so these
class names are what a workflow's ``Retry``/``Catch`` and a learner's execution output
show. Renaming one means changing the state machine too.
"""

# A function deployed without a variable it needs: every lesson's deployment error, raised
# by shared.settings, named here as well so a handler's errors are all in one place.
from shared.settings import ConfigurationError as ConfigurationError


class VehicleRegistrationError(Exception):
    """Base class of every failure the vehicle-registration functions raise on purpose."""


class MalformedRequestError(VehicleRegistrationError):
    """The request is missing a field, has a field of the wrong type, or has extra fields."""


class InvalidVinError(VehicleRegistrationError):
    """The VIN is not 17 legal characters or its check digit (position 9) does not match."""


class StolenVehicleError(VehicleRegistrationError):
    """The RMV check found the VIN on the stolen-vehicle list."""


class RequestMismatchError(VehicleRegistrationError):
    """A request id already registered a different vehicle or owner: a reused key, not a retry."""


class NotifyTransientError(VehicleRegistrationError):
    """The notification failed for now (injected); the workflow retries it."""
