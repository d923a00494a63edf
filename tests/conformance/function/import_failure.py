"""A handler module that fails while Lambda loads it: its configuration is missing.

Python 3.12+ runtimes report such an exception with its own type and message (only an
ImportError becomes ``Runtime.ImportModuleError``).
"""


class ConfigurationMissing(Exception):
    """A setting the module needs at import time is absent."""


raise ConfigurationMissing("SETTINGS_TABLE is not set")


def handler(event, context):  # never reached: the module does not finish loading
    return {}
