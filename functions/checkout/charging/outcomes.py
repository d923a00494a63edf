"""The closed set of answers a checkout gives, so callers never compare loose strings."""

CHARGED = "charged"  # this invocation made (or was confirmed by) a charge
REPLAYED = "replayed"  # an earlier invocation's result was returned, no new charge
IN_PROGRESS = "in_progress"  # another invocation holds the key right now; retry later
REJECTED = "rejected"  # bad input or a reused key with another payload; no charge
FAILED = "failed"  # the processor refused the charge; nothing was charged
# The processor's answer was lost (it timed out, crashed, or the connection dropped): it
# may have charged or not, and the checkout cannot tell. Only a retry with the key passed
# downstream resolves it: the processor then answers with the first charge, or makes it.
UNKNOWN = "unknown"

ALL = (CHARGED, REPLAYED, IN_PROGRESS, REJECTED, FAILED, UNKNOWN)
