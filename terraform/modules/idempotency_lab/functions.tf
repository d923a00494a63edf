locals {
  # One entry per function; its zip is <artifacts_dir>/<scenario>.zip and its handler
  # `<key>.handler` unless `handler` says otherwise. From the entry come its role (only
  # what it lists), its environment and its asynchronous-invoke settings:
  #   tables  = { <table key> = <access level in local.table_actions> }  -> <KEY>_TABLE
  #   invokes = [<function key>]                                          -> <KEY>_FUNCTION
  #   sends   = [<queue key>]                                             -> <KEY>_QUEUE_URL
  #   starts  = [<workflow key>]                                          -> <KEY>_STATE_MACHINE_ARN
  #   grants  = [<key in local.extra_grants>], env = { NAME = "value" }, timeout = seconds
  functions = {
    # Lesson 1: vehicle registration.
    rmv_check                = { scenario = "vehicle_registration", timeout = 10 }
    write_vehicle_naive      = { scenario = "vehicle_registration", timeout = 10, tables = { vehicles_naive = "read_write" } }
    write_vehicle_idempotent = { scenario = "vehicle_registration", timeout = 10, tables = { vehicles = "read_write" } }
    notify                   = { scenario = "vehicle_registration", timeout = 10, tables = { faults = "read_update" } }

    # Lesson 2: checkout; every checkout charges through card_processor.
    card_processor      = { scenario = "checkout", timeout = 10, tables = { ledger = "read_write", processor_keys = "read_write" } }
    checkout_naive      = { scenario = "checkout", timeout = 15, invokes = ["card_processor"] }
    checkout_handrolled = { scenario = "checkout", timeout = 15, invokes = ["card_processor"], tables = { handrolled_idempotency = "read_write", faults = "read_update" } }
    # Powertools' in-progress lease lasts as long as the invocation may: a short timeout
    # lets the crash-after-charge demo show the lease expiring within seconds.
    checkout_powertools = { scenario = "checkout", timeout = 6, invokes = ["card_processor"], tables = { powertools_idempotency = "idempotency", faults = "read_update" } }
    # The same handler with Powertools' local cache on: a row of its own in `make bench`.
    checkout_powertools_cached = { scenario = "checkout", handler = "checkout_powertools.handler", timeout = 6, invokes = ["card_processor"], tables = { powertools_idempotency = "idempotency", faults = "read_update" }, env = { IDEMPOTENCY_LOCAL_CACHE = "true" } }

    # Lesson 3: delayed account deletion.
    request_deletion = {
      scenario = "account_deletion", timeout = 10, tables = { deletion_requests = "read_write" }
      # The schedules it creates start the workflow as Scheduler's role: it needs the ARN, not the right.
      grants = ["create_deletion_schedule"]
      env    = { DELETION_DELAY_SECONDS = tostring(var.deletion_delay_seconds), ACCOUNT_DELETION_STATE_MACHINE_ARN = local.workflow_arn["account_deletion"] }
    }
    cancel_deletion   = { scenario = "account_deletion", timeout = 10, tables = { deletion_requests = "read_write" }, grants = ["delete_deletion_schedule"] }
    claim_deletion    = { scenario = "account_deletion", timeout = 10, tables = { deletion_requests = "read_write", faults = "read_update" }, env = local.deletion_env }
    delete_records    = { scenario = "account_deletion", timeout = 30, tables = { deletion_requests = "read_write", user_records = "read_write", faults = "read_update" }, env = local.deletion_env }
    delete_files      = { scenario = "account_deletion", timeout = 30, tables = { deletion_requests = "read_write", faults = "read_update" }, grants = ["delete_user_files"], env = local.deletion_env }
    delete_identity   = { scenario = "account_deletion", timeout = 10, tables = { deletion_requests = "read_write", identities = "read_write", faults = "read_update" }, env = local.deletion_env }
    send_goodbye      = { scenario = "account_deletion", timeout = 10, tables = { deletion_requests = "read_write", email_outbox = "read_write", faults = "read_update" }, env = local.deletion_env }
    complete_deletion = { scenario = "account_deletion", timeout = 10, tables = { deletion_requests = "read_write", faults = "read_update" }, sends = ["deletion_dlq"], env = merge(local.deletion_env, { ACCOUNT_DELETION_STATE_MACHINE_ARN = local.workflow_arn["account_deletion"] }) }
    naive_deletion_worker = {
      scenario = "account_deletion", timeout = 60, grants = ["delete_user_files"]
      tables   = { deletion_requests = "read_write", user_records = "read_write", identities = "read_write", email_outbox = "read_write", faults = "read_update" }
    }
    sweeper = {
      scenario = "account_deletion", timeout = 60, tables = { deletion_requests = "read_write" }, sends = ["deletion_dlq"]
      starts   = ["account_deletion"], grants = ["put_stuck_metric"], env = local.deletion_env
    }

    # Lesson 4: queues. Each consumer reserves stock for the order lines its queue
    # delivers (event sources in queue_lesson.tf). The 2 s timeout keeps the queues'
    # visibility timeout, six times longer, short for the workshop.
    fulfil_naive         = { scenario = "order_fulfilment", timeout = 2, tables = { stock = "read_update", reservations = "read_write" } }
    fulfil_idempotent    = { scenario = "order_fulfilment", timeout = 2, tables = { stock = "read_update", reservations = "read_write", order_idempotency = "idempotency" } }
    fulfil_by_message_id = { scenario = "order_fulfilment", timeout = 2, tables = { stock = "read_update", reservations = "read_write", order_idempotency = "idempotency" } }
  }

  deletion_env = {
    LEASE_SECONDS     = tostring(var.deletion_lease_seconds)
    MAX_ATTEMPTS      = tostring(var.deletion_max_attempts)
    METRIC_NAMESPACE  = var.stuck_metric_namespace
    STUCK_METRIC_NAME = local.stuck_metric_name
  }

  # Where each scenario's failed asynchronous invocations go.
  scenario_dlq = {
    vehicle_registration = "vehicle_registration_dlq"
    checkout             = "checkout_dlq"
    account_deletion     = "deletion_dlq"
    order_fulfilment     = "order_fulfilment_dlq"
  }

  function_specs = { for key, f in local.functions : key => {
    scenario = f.scenario
    handler  = try(f.handler, "${key}.handler")
    timeout  = try(f.timeout, 10)
    tables   = try(f.tables, {})
    invokes  = try(f.invokes, [])
    sends    = try(f.sends, [])
    starts   = try(f.starts, [])
    grants   = try(f.grants, [])
    env      = try(f.env, {})
    dlq      = try(f.dlq, lookup(local.scenario_dlq, f.scenario, "(no DLQ for this scenario)"))
  } }

  # Names the lab itself reads: every function knows the bucket, the schedule group, the
  # scheduler role and the scheduler DLQ, because handlers build their own clients.
  common_env = {
    LAB_PREFIX                   = var.prefix
    USER_FILES_BUCKET            = aws_s3_bucket.this["user_files"].bucket
    SCHEDULE_GROUP               = aws_scheduler_schedule_group.this.name
    SCHEDULER_ROLE_ARN           = aws_iam_role.scheduler.arn
    SCHEDULER_DLQ_ARN            = local.queue_arns["scheduler_dlq"]
    POWERTOOLS_METRICS_NAMESPACE = var.stuck_metric_namespace
  }
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
  s3_bucket        = aws_s3_object.code[each.value.scenario].bucket
  s3_key           = aws_s3_object.code[each.value.scenario].key
  source_code_hash = filebase64sha256("${var.artifacts_dir}/${each.value.scenario}.zip")

  environment {
    variables = merge(
      local.common_env,
      { POWERTOOLS_SERVICE_NAME = each.key },
      { for t in keys(each.value.tables) : "${upper(t)}_TABLE" => try(aws_dynamodb_table.this[t].name, local.unknown) },
      { for f in each.value.invokes : "${upper(f)}_FUNCTION" => lookup(local.name, f, local.unknown) },
      { for q in each.value.sends : "${upper(q)}_QUEUE_URL" => lookup(local.queue_urls, q, local.unknown) },
      { for w in each.value.starts : "${upper(w)}_STATE_MACHINE_ARN" => lookup(local.workflow_arn, w, local.unknown) },
      each.value.env,
    )
  }

  tracing_config {
    mode = "Active"
  }

  #checkov:skip=CKV_AWS_116:failed asynchronous invocations go to an on-failure destination (aws_lambda_function_event_invoke_config), which keeps the error as well as the event
  #checkov:skip=CKV_AWS_117:the functions only call AWS APIs; a VPC would need NAT or endpoints and adds cost without isolating anything here
  #checkov:skip=CKV_AWS_115:reserved concurrency would eat into the small concurrency quota of new accounts and can make the apply fail
  #checkov:skip=CKV_AWS_173:the environment holds resource names only, no secrets; the default AWS-managed key encrypts it at rest
  #checkov:skip=CKV_AWS_272:code signing needs a signing profile and signed zips; the zips are built and deployed by the same person in the workshop
  tags = merge(local.tags, { Name = local.name[each.key], "idemlab:scenario" = each.value.scenario })

  depends_on = [aws_cloudwatch_log_group.function, aws_iam_role_policy.function]
}

resource "aws_lambda_function_event_invoke_config" "this" {
  for_each = local.function_specs

  function_name                = aws_lambda_function.this[each.key].function_name
  maximum_retry_attempts       = var.async_maximum_retry_attempts
  maximum_event_age_in_seconds = var.async_maximum_event_age_seconds

  destination_config {
    on_failure {
      destination = lookup(local.queue_arns, each.value.dlq, local.unknown)
    }
  }
}
