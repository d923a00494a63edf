# Keys ending in `_dlq` are dead-letter queues: kept 14 days, watched by an alarm. A work queue
# sends a message to its dead-letter queue after `redrive.max_receive_count` receives.
variable "queues" {
  description = "The lab's SQS queues, keyed by the name functions use (`<KEY>_QUEUE_URL`); keys ending in `_dlq` are dead-letter queues."
  type = map(object({
    redrive = optional(object({
      dlq               = string
      max_receive_count = number
    }))
    # null: 14 days for a dead-letter queue, 4 days (SQS's default) for a work queue.
    retention_seconds  = optional(number)
    visibility_seconds = optional(number, 60)
    fifo               = optional(bool, false)
  }))
  nullable = false
  default = {
    vehicle_registration_dlq = {} # failed async invocations of the vehicles functions
    checkout_dlq             = {} # ... of the checkout functions
    deletion_dlq             = {} # ... of the deletion functions, and requests past their last attempt
    scheduler_dlq            = {} # deletion schedules Scheduler could not start
    sweeper_rule_dlq         = {} # sweeper runs EventBridge could not deliver
    order_fulfilment_dlq     = {} # ... of the queues functions

    # queues (lesson 06): one order queue per consumer (var.event_sources maps each to its function).
    # Visibility: six times the consumers' 2 s timeout; compressed time for the workshop.
    # Two receives, then the DLQ (notebook 06 reads the count back from the queue).
    orders_naive             = { redrive = { dlq = "orders_naive_dlq", max_receive_count = 2 }, visibility_seconds = 12 }
    orders_naive_dlq         = {}
    orders                   = { redrive = { dlq = "orders_dlq", max_receive_count = 2 }, visibility_seconds = 12 }
    orders_dlq               = {}
    orders_by_message_id     = { redrive = { dlq = "orders_by_message_id_dlq", max_receive_count = 2 }, visibility_seconds = 12 }
    orders_by_message_id_dlq = {}
    # FIFO with content-based deduplication; its DLQ must be FIFO too.
    orders_fifo     = { redrive = { dlq = "orders_fifo_dlq", max_receive_count = 2 }, visibility_seconds = 12, fifo = true }
    orders_fifo_dlq = { fifo = true }
  }

  validation {
    condition     = alltrue([for key in keys(var.queues) : can(regex("^[a-z][a-z0-9_]*$", key))])
    error_message = "Queue keys must be lower_snake_case (they become `<prefix>-<key>` names and `<KEY>_QUEUE_URL` variables)."
  }

  # Names the wrong entries: the list is written twice, as the same expression (functions.tf says why).
  validation {
    condition = length([
      for key, q in var.queues : "${key} -> ${q.redrive.dlq}"
      if q.redrive == null ? false : (
        endswith(key, "_dlq") || !contains([for k, d in var.queues : k if endswith(k, "_dlq") && d.fifo == q.fifo], q.redrive.dlq)
      )
    ]) == 0
    error_message = format(
      "A work queue redrives to a `_dlq` key of var.queues, FIFO exactly when it is (SQS requires it); a dead-letter queue has no redrive. Wrong: %s.",
      join("; ", [
        for key, q in var.queues : "${key} -> ${q.redrive.dlq}"
        if q.redrive == null ? false : (
          endswith(key, "_dlq") || !contains([for k, d in var.queues : k if endswith(k, "_dlq") && d.fifo == q.fifo], q.redrive.dlq)
        )
      ]),
    )
  }

  validation {
    condition     = contains(keys(var.queues), "scheduler_dlq") && contains(keys(var.queues), "sweeper_rule_dlq")
    error_message = "var.queues must keep `scheduler_dlq` and `sweeper_rule_dlq`: the module's Scheduler role and sweeper rule send to them."
  }

  validation {
    # SQS limits: maxReceiveCount 1-1000, retention 60 s to 14 days, visibility 0-12 h.
    condition = alltrue([for q in values(var.queues) :
      (q.redrive == null ? true : q.redrive.max_receive_count >= 1 && q.redrive.max_receive_count <= 1000) &&
      (q.retention_seconds == null ? true : q.retention_seconds >= 60 && q.retention_seconds <= 1209600) &&
      q.visibility_seconds >= 0 && q.visibility_seconds <= 43200
    ])
    error_message = "Queue settings outside SQS's limits: redrive.max_receive_count 1-1000, retention_seconds 60-1209600, visibility_seconds 0-43200."
  }
}

locals {
  # The queue keys var.functions (`sends`, `dlq`) and var.event_sources (`queue`) may name.
  dead_letter_queue_keys = [for key in keys(var.queues) : key if endswith(key, "_dlq")]
  work_queue_keys        = [for key in keys(var.queues) : key if !endswith(key, "_dlq")]

  queue_specs = { for key, q in var.queues : key => merge(q, {
    is_dlq = endswith(key, "_dlq")
    # A DLQ keeps messages as long as SQS allows, so a failure can be read and redriven later.
    retention_seconds = coalesce(q.retention_seconds, endswith(key, "_dlq") ? 1209600 : 345600)
  }) }

  # SQS requires a FIFO queue's name to end in ".fifo".
  queue_name = { for key, q in var.queues : key => q.fifo ? "${local.name[key]}.fifo" : local.name[key] }
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
  policy = lookup(local.queue_policies, each.key, null)

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

  redrive_policy = each.value.redrive == null ? null : jsonencode({
    deadLetterTargetArn = aws_sqs_queue.dead_letter[each.value.redrive.dlq].arn
    maxReceiveCount     = each.value.redrive.max_receive_count
  })

  tags = merge(local.tags, { Name = local.queue_name[each.key] })
}

locals {
  # What a queue's ARN will be, known before the queue exists: IAM statements name queues this
  # way, so roles and functions need not wait for them. The provider waits about 25 s after
  # creating each queue, and a work queue waits for its dead-letter queue first: anything
  # that referred to the work queues would start only after both waits.
  queue_arn = { for key in keys(var.queues) : key => "arn:${local.partition}:sqs:${local.region}:${local.account_id}:${local.queue_name[key]}" }

  # The dead-letter queues exist by the time functions are created; the work queues may not.
  dead_letter_arns = { for key, q in aws_sqs_queue.dead_letter : key => q.arn }
  dead_letter_urls = { for key, q in aws_sqs_queue.dead_letter : key => q.url }

  queue_arns = merge(
    { for key, q in aws_sqs_queue.dead_letter : key => q.arn },
    { for key, q in aws_sqs_queue.work : key => q.arn },
  )
  queue_urls = merge(
    { for key, q in aws_sqs_queue.dead_letter : key => q.url },
    { for key, q in aws_sqs_queue.work : key => q.url },
  )
}
