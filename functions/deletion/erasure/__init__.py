"""What the account-deletion handlers share: the request's states, claims and leases, the
sweeper's finds, the steps as recovery points, fault points, settings, errors, input checks
and the dead-letter queue."""
