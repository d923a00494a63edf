"""LocalStack 4.14.0 without Docker: installed from PyPI into a venv of its own, started as
a local process on loopback, with Lambda functions run as local processes (executor.py).
"""
