locals {
  # The queue keys var.functions (`sends`, `dlq`) and var.event_sources (`queue`) may name.
  dead_letter_queue_keys = [for key in keys(var.queues) : key if endswith(key, "_dlq")]
  work_queue_keys        = [for key in keys(var.queues) : key if !endswith(key, "_dlq")]

  # The queues of the chosen lessons (var.lessons, main.tf).
  queue_specs = { for key, q in var.queues : key => merge(q, {
    is_dlq = endswith(key, "_dlq")
    # A DLQ keeps messages as long as SQS allows, so a failure can be read and redriven later.
    retention_seconds = coalesce(q.retention_seconds, endswith(key, "_dlq") ? 1209600 : 345600)
  }) if q.lessons == null || length(setintersection(coalesce(q.lessons, []), local.chosen_lessons)) > 0 }

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
