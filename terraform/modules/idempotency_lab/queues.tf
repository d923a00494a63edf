locals {
  # One entry per queue. Keys ending in `_dlq` are dead-letter queues: kept 14 days, watched
  # by an alarm. A work queue names its DLQ with `redrive_to` (and `max_receive_count`).
  queues = {
    vehicle_registration_dlq = {} # failed async invocations of lesson 1 functions
    checkout_dlq             = {} # ... of lesson 2 functions
    deletion_dlq             = {} # ... of lesson 3 functions, and requests past their last attempt
    scheduler_dlq            = {} # deletion schedules Scheduler could not start
    sweeper_rule_dlq         = {} # sweeper runs EventBridge could not deliver
    order_fulfilment_dlq     = {} # failed async invocations of lesson 4 functions

    # Lesson 4: one order queue per consumer (queue_lesson.tf maps each to its function).
    # Visibility: six times the consumers' 2 s timeout (see local.event_sources);
    # compressed time for the workshop. Two receives, then the DLQ.
    orders_naive             = { redrive_to = "orders_naive_dlq", max_receive_count = 2, visibility_seconds = 12 }
    orders_naive_dlq         = {}
    orders                   = { redrive_to = "orders_dlq", max_receive_count = 2, visibility_seconds = 12 }
    orders_dlq               = {}
    orders_by_message_id     = { redrive_to = "orders_by_message_id_dlq", max_receive_count = 2, visibility_seconds = 12 }
    orders_by_message_id_dlq = {}
    # FIFO with content-based deduplication; its DLQ must be FIFO too.
    orders_fifo     = { redrive_to = "orders_fifo_dlq", max_receive_count = 2, visibility_seconds = 12, fifo = true }
    orders_fifo_dlq = { fifo = true }
  }

  queue_specs = { for key, q in local.queues : key => {
    is_dlq            = endswith(key, "_dlq")
    redrive_to        = try(q.redrive_to, null)
    max_receive_count = try(q.max_receive_count, 5)
    # A DLQ keeps messages as long as SQS allows, so a failure can be read and redriven later.
    retention_seconds  = try(q.retention_seconds, endswith(key, "_dlq") ? 1209600 : 345600)
    visibility_seconds = try(q.visibility_seconds, 60)
    fifo               = try(q.fifo, false)
  } }

  # SQS requires a FIFO queue's name to end in ".fifo".
  queue_name = { for key, q in local.queue_specs : key => q.fifo ? "${local.name[key]}.fifo" : local.name[key] }
}

# Two resources, because a work queue's redrive policy refers to its dead-letter queue.
resource "aws_sqs_queue" "dead_letter" {
  for_each = { for key, q in local.queue_specs : key => q if q.is_dlq }

  name                        = local.queue_name[each.key]
  fifo_queue                  = each.value.fifo ? true : null
  content_based_deduplication = each.value.fifo ? true : null
  message_retention_seconds   = each.value.retention_seconds
  visibility_timeout_seconds  = each.value.visibility_seconds
  sqs_managed_sse_enabled     = true
  # Inline rather than an aws_sqs_queue_policy: the provider waits about 25 s for each
  # queue's attributes to settle, and a separate policy resource waits as long again.
  policy = try(local.queue_policies[each.key], null)

  tags = merge(local.tags, { Name = local.queue_name[each.key] })
}

resource "aws_sqs_queue" "work" {
  for_each = { for key, q in local.queue_specs : key => q if !q.is_dlq }

  name                        = local.queue_name[each.key]
  fifo_queue                  = each.value.fifo ? true : null
  content_based_deduplication = each.value.fifo ? true : null
  message_retention_seconds   = each.value.retention_seconds
  visibility_timeout_seconds  = each.value.visibility_seconds
  sqs_managed_sse_enabled     = true

  redrive_policy = each.value.redrive_to == null ? null : jsonencode({
    deadLetterTargetArn = aws_sqs_queue.dead_letter[each.value.redrive_to].arn
    maxReceiveCount     = each.value.max_receive_count
  })

  tags = merge(local.tags, { Name = local.queue_name[each.key] })
}

locals {
  queue_arns = merge(
    { for key, q in aws_sqs_queue.dead_letter : key => q.arn },
    { for key, q in aws_sqs_queue.work : key => q.arn },
  )
  queue_urls = merge(
    { for key, q in aws_sqs_queue.dead_letter : key => q.url },
    { for key, q in aws_sqs_queue.work : key => q.url },
  )
}
