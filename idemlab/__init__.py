"""Idempotency Lab harness: backends, clients, deploy and exercises for the workshop."""
