"""The closed set of answers a checkout gives, so callers never compare loose strings."""

CHARGED = "charged"  # this invocation made (or was confirmed by) a charge
REPLAYED = "replayed"  # an earlier invocation's result was returned, no new charge
IN_PROGRESS = "in_progress"  # another invocation holds the key right now; retry later
REJECTED = "rejected"  # bad input or a reused key with another payload; no charge
FAILED = "failed"  # the processor refused or broke; no charge recorded

ALL = (CHARGED, REPLAYED, IN_PROGRESS, REJECTED, FAILED)
