"""The embedded backend: moto's server, extended where the lessons need AWS behaviour.

moto alone gets three things wrong for this lab (see docs/DESIGN.md): conditional
writes race, Lambda does not run handlers without Docker, and Step Functions lacks
StartSyncExecution. Each fix lives in its own module here, as does each place where
moto answers what AWS refuses (Express executions read back, malformed schedules) and
what keeps a server that runs uploaded code safe on a laptop (loopback only, a Lambda
concurrency limit).
"""
