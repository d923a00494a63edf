"""The embedded backend: moto's server, extended where the lessons need AWS behaviour.

`server.serve` installs each change to moto from its own module here; each module's
docstring says what moto does, what AWS does instead, and where that is documented.
docs/DESIGN.md ("The embedded backend") lists what the backend adds and refuses.
"""
