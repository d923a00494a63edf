locals {
  # Lesson 4: which function consumes which queue (Lambda event source mappings).
  #   report_batch_item_failures: the function returns `batchItemFailures`, so only the
  #   records it lists come back; without it one failed record fails the whole batch.
  #   batching_window_seconds: how long Lambda gathers a batch (0 for FIFO queues, which
  #   have no batching window; Lambda developer guide, services-sqs-parameters.html).
  event_sources = {
    orders_naive         = { function = "fulfil_naive", queue = "orders_naive", report_batch_item_failures = false, batching_window_seconds = 1 }
    orders               = { function = "fulfil_idempotent", queue = "orders", report_batch_item_failures = true, batching_window_seconds = 1 }
    orders_by_message_id = { function = "fulfil_by_message_id", queue = "orders_by_message_id", report_batch_item_failures = true, batching_window_seconds = 1 }
    # The naive consumer behind a FIFO queue: deduplicated sends, redelivered failures.
    orders_fifo = { function = "fulfil_naive", queue = "orders_fifo", report_batch_item_failures = false, batching_window_seconds = 0 }
  }
}

resource "aws_lambda_event_source_mapping" "sqs" {
  for_each = local.event_sources

  event_source_arn                   = lookup(local.queue_arns, each.value.queue, local.unknown)
  function_name                      = aws_lambda_function.this[each.value.function].arn
  batch_size                         = 10
  maximum_batching_window_in_seconds = each.value.batching_window_seconds
  function_response_types            = each.value.report_batch_item_failures ? ["ReportBatchItemFailures"] : []

  lifecycle {
    precondition {
      # "Set the source queue's visibility timeout to at least six times the timeout
      # that you configure on your function" (Lambda developer guide, services-sqs-configure.html):
      # room for Lambda to retry a throttled batch before the messages come back.
      condition     = local.queue_specs[each.value.queue].visibility_seconds >= 6 * local.function_specs[each.value.function].timeout
      error_message = "queue ${each.value.queue}: visibility timeout ${local.queue_specs[each.value.queue].visibility_seconds} s is less than six times the timeout of ${each.value.function}"
    }
  }

  # The role must allow polling before the mapping is created (Lambda checks it).
  depends_on = [aws_iam_role_policy.function]
}
