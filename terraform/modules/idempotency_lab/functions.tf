locals {
  # Module inputs a function entry asks for by name in `settings`.
  function_settings = {
    deletion_delay = { DELETION_DELAY_SECONDS = tostring(var.deletion_delay_seconds) }
    deletion_lease = {
      LEASE_SECONDS     = tostring(var.deletion_lease_seconds)
      MAX_ATTEMPTS      = tostring(var.deletion_max_attempts)
      METRIC_NAMESPACE  = var.stuck_metric_namespace
      STUCK_METRIC_NAME = local.stuck_metric_name
    }
  }

  # Where each lesson's failed asynchronous invocations go.
  lesson_dlq = {
    vehicles = "vehicle_registration_dlq"
    checkout = "checkout_dlq"
    deletion = "deletion_dlq"
    queues   = "order_fulfilment_dlq"
  }

  # The functions of the chosen lessons (var.lessons, main.tf); a caller's own lesson, which
  # var.lessons cannot name, is always provisioned.
  function_specs = { for key, f in var.functions : key => merge(f, {
    handler = coalesce(f.handler, "${key}.handler")
    dlq     = coalesce(f.dlq, lookup(local.lesson_dlq, f.lesson, "-"))
  }) if contains(local.chosen_lessons, f.lesson) || !contains(keys(local.lesson_builds_on), f.lesson) }

  # Names the lab itself reads: every function knows the bucket, the schedule group, the
  # scheduler role and the scheduler DLQ, because handlers build their own clients.
  common_env = merge(
    {
      LAB_PREFIX                   = var.prefix
      USER_FILES_BUCKET            = aws_s3_bucket.this["user_files"].bucket
      SCHEDULE_GROUP               = aws_scheduler_schedule_group.this.name
      SCHEDULER_ROLE_ARN           = aws_iam_role.scheduler.arn
      POWERTOOLS_METRICS_NAMESPACE = var.stuck_metric_namespace
    },
    # Only while the deletion lesson's queue exists (var.lessons).
    { for key, arn in local.dead_letter_arns : "SCHEDULER_DLQ_ARN" => arn if key == "scheduler_dlq" },
  )
}

resource "aws_cloudwatch_log_group" "function" {
  for_each = local.function_specs

  name              = "/aws/lambda/${local.name[each.key]}"
  retention_in_days = var.log_retention_days
  #checkov:skip=CKV_AWS_158:AWS-managed encryption of CloudWatch Logs; a customer-managed key adds a monthly fee and a key policy for workshop logs
  #checkov:skip=CKV_AWS_338:workshop logs are kept for var.log_retention_days (14 days by default), not a year
  tags = merge(local.tags, { Name = local.name[each.key] })
}

resource "aws_lambda_function" "this" {
  for_each = local.function_specs

  function_name    = local.name[each.key]
  role             = aws_iam_role.function[each.key].arn
  runtime          = var.lambda_runtime
  handler          = each.value.handler
  timeout          = each.value.timeout
  memory_size      = var.lambda_memory_mb
  s3_bucket        = aws_s3_object.code[each.value.lesson].bucket
  s3_key           = aws_s3_object.code[each.value.lesson].key
  source_code_hash = filebase64sha256("${var.artifacts_dir}/${each.value.lesson}.zip")

  environment {
    variables = merge(
      local.common_env,
      { POWERTOOLS_SERVICE_NAME = each.key },
      { for t in keys(each.value.tables) : "${upper(t)}_TABLE" => aws_dynamodb_table.this[t].name },
      { for f in each.value.invokes : "${upper(f)}_FUNCTION" => local.name[f] },
      { for q in each.value.sends : "${upper(q)}_QUEUE_URL" => local.dead_letter_urls[q] },
      { for w in concat(each.value.starts, each.value.knows) : "${upper(w)}_STATE_MACHINE_ARN" => local.workflow_arn[w] },
      merge([for s in each.value.settings : local.function_settings[s]]...),
      each.value.env,
    )
  }

  tracing_config {
    mode = "Active"
  }

  #checkov:skip=CKV_AWS_116:failed asynchronous invocations go to an on-failure destination (the event invoke config), which keeps the error too
  #checkov:skip=CKV_AWS_117:the functions only call AWS APIs; a VPC would need NAT or endpoints and adds cost without isolating anything here
  #checkov:skip=CKV_AWS_115:reserved concurrency would eat into the small concurrency quota of new accounts and can make the apply fail
  #checkov:skip=CKV_AWS_173:the environment holds resource names only, no secrets; the default AWS-managed key encrypts it at rest
  #checkov:skip=CKV_AWS_272:code signing needs a signing profile and signed zips; the zips are built and deployed by the same person in the workshop
  tags = merge(local.tags, { Name = local.name[each.key], "idemlab:lesson" = each.value.lesson })

  depends_on = [aws_cloudwatch_log_group.function, aws_iam_role_policy.function]
}

resource "aws_lambda_function_event_invoke_config" "this" {
  for_each = local.function_specs

  function_name                = aws_lambda_function.this[each.key].function_name
  maximum_retry_attempts       = var.async_maximum_retry_attempts
  maximum_event_age_in_seconds = var.async_maximum_event_age_seconds

  destination_config {
    on_failure {
      destination = local.dead_letter_arns[each.value.dlq]
    }
  }
}
