"""The backends `python -m idemlab up|down|status` runs (``idemlab/backend.py`` is the entry
point), one module each: ``embedded``, ``localstack_docker`` (LocalStack in Docker, by Compose
or the LocalStack CLI), ``native_localstack`` (LocalStack as local processes) and ``aws``; what
every LocalStack shares (``localstack_common``: docker-compose.yml's settings, its health answer,
reusing one already running); and the lab's background processes (``daemons``: pid and log
files, and waiting for a busy backend of the lab's own).
"""


class BackendError(Exception):
    """The backend could not be brought up or down; the message is for the user."""
