variable "event_sources" {
  description = "The queues lesson (06): which function consumes which queue (Lambda event source mappings)."
  type = map(object({
    function = string
    queue    = string
    # The function returns `batchItemFailures`, so only the records it lists come back;
    # without it one failed record fails the whole batch.
    report_batch_item_failures = optional(bool, false)
    # How long Lambda gathers a batch: 0 for FIFO queues, which have no batching window
    # (Lambda developer guide, services-sqs-parameters.html).
    batching_window_seconds = optional(number, 0)
  }))
  nullable = false
  default = {
    orders_naive         = { function = "fulfil_naive", queue = "orders_naive", batching_window_seconds = 1 }
    orders               = { function = "fulfil_idempotent", queue = "orders", report_batch_item_failures = true, batching_window_seconds = 1 }
    orders_by_message_id = { function = "fulfil_by_message_id", queue = "orders_by_message_id", report_batch_item_failures = true, batching_window_seconds = 1 }
    # The naive consumer behind a FIFO queue: deduplicated sends, redelivered failures.
    orders_fifo = { function = "fulfil_naive", queue = "orders_fifo" }
  }

  # The rules below name the wrong entries: each list is written twice, as the same expression
  # (functions.tf says why).
  validation {
    condition = length([
      for key, e in var.event_sources : "${key}: ${e.function} <- ${e.queue}"
      if !contains(keys(var.functions), e.function) || !contains(local.work_queue_keys, e.queue)
    ]) == 0
    error_message = format(
      "Every event source maps a key of var.functions to a work queue (a key of var.queues not ending in _dlq). Wrong: %s.",
      join("; ", [
        for key, e in var.event_sources : "${key}: ${e.function} <- ${e.queue}"
        if !contains(keys(var.functions), e.function) || !contains(local.work_queue_keys, e.queue)
      ]),
    )
  }

  # "Set the source queue's visibility timeout to at least six times the timeout that you
  # configure on your function" (Lambda developer guide, services-sqs-configure.html): room
  # for Lambda to retry a throttled batch before the messages come back. An entry naming a
  # function or queue that does not exist is the rule above's (try: false).
  validation {
    condition = length([
      for key, e in var.event_sources : "${key}: ${e.queue} ${var.queues[e.queue].visibility_seconds} s, ${e.function} ${var.functions[e.function].timeout} s"
      if try(var.queues[e.queue].visibility_seconds < 6 * var.functions[e.function].timeout, false)
    ]) == 0
    error_message = format(
      "A mapped queue's visibility timeout is at least six times its function's timeout (Lambda developer guide, services-sqs-configure.html). Wrong: %s.",
      join("; ", [
        for key, e in var.event_sources : "${key}: ${e.queue} ${var.queues[e.queue].visibility_seconds} s, ${e.function} ${var.functions[e.function].timeout} s"
        if try(var.queues[e.queue].visibility_seconds < 6 * var.functions[e.function].timeout, false)
      ]),
    )
  }

  validation {
    condition = length([
      for key, e in var.event_sources : "${key} (${e.batching_window_seconds} s)" if e.batching_window_seconds < 0 || e.batching_window_seconds > 300
    ]) == 0
    error_message = format(
      "batching_window_seconds is 0-300 (Lambda's limits). Wrong: %s.",
      join("; ", [
        for key, e in var.event_sources : "${key} (${e.batching_window_seconds} s)" if e.batching_window_seconds < 0 || e.batching_window_seconds > 300
      ]),
    )
  }
}

resource "aws_lambda_event_source_mapping" "sqs" {
  for_each = var.event_sources

  event_source_arn                   = local.queue_arns[each.value.queue]
  function_name                      = aws_lambda_function.this[each.value.function].arn
  batch_size                         = 10
  maximum_batching_window_in_seconds = each.value.batching_window_seconds
  function_response_types            = each.value.report_batch_item_failures ? ["ReportBatchItemFailures"] : []

  # The role must allow polling before the mapping is created (Lambda checks it).
  depends_on = [aws_iam_role_policy.function]
}
