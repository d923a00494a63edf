resource "aws_lambda_event_source_mapping" "sqs" {
  # The mappings of the chosen lessons (var.lessons, main.tf).
  for_each = { for key, e in var.event_sources : key => e if e.lesson == null || contains(local.chosen_lessons, coalesce(e.lesson, "-")) }

  event_source_arn                   = local.queue_arns[each.value.queue]
  function_name                      = aws_lambda_function.this[each.value.function].arn
  batch_size                         = 10
  maximum_batching_window_in_seconds = each.value.batching_window_seconds
  function_response_types            = each.value.report_batch_item_failures ? ["ReportBatchItemFailures"] : []

  # The role must allow polling before the mapping is created (Lambda checks it).
  depends_on = [aws_iam_role_policy.function]
}
