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
