"""The redrive horizon: how late a copy of a queued request can still arrive.

One model, used by every lesson, exercise and consumer of the lab (lessons 06, 07, 08,
their exercises, the capstone checker, the glossary and `fulfil_idempotent`):

1. A message on an SQS standard queue keeps its first enqueue time when SQS moves it to
   the dead-letter queue, so the dead-letter queue's retention counts from the first send
   (SQS developer guide, "Setting-up dead-letter queue retention":
   https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/setting-up-dead-letter-queue-retention.html).
   The receives on the work queue before the move are inside that retention, not added to
   it. A queue keeps a message at most 1,209,600 s, 14 days (`MessageRetentionPeriod` in
   https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SetQueueAttributes.html).
   So the latest a dead letter can be redriven is 14 days after the first send: the
   **redrive horizon**.
2. A redrive sends the body back as a new message, with a new `messageId` and a new
   enqueue time, so its retention starts again (SQS developer guide, "Configure a
   dead-letter queue redrive":
   https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-configure-dead-letter-queue-redrive.html).
   A redriven copy that fails again (or waits, its consumer paused) therefore has a
   horizon of its own, counted from the redrive: every further redrive adds up to one
   horizon.

The rule: an idempotency record written at the first delivery must live at least one
horizon to cover one redrive, and one more horizon for each further redrive the
operators may make. Lessons 07 and 08 and their exercises cover one redrive
(`REDRIVE_HORIZON_SECONDS`); lesson 06's consumer keeps its records for three horizons
and a day. A FIFO queue differs in step 1 (its dead-letter queue restarts the clock),
which no lesson's redrive uses.
"""

from __future__ import annotations

DAY = 24 * 60 * 60
# SQS's maximum MessageRetentionPeriod (SetQueueAttributes): 1,209,600 s.
SQS_MAX_RETENTION_SECONDS = 14 * DAY
# A standard queue's dead letter, its DLQ kept at the maximum, can be redriven up to this
# long after its first send.
REDRIVE_HORIZON_SECONDS = SQS_MAX_RETENTION_SECONDS
REDRIVE_HORIZON_DAYS = REDRIVE_HORIZON_SECONDS // DAY
