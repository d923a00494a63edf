# The lab's functions. Each function's code is <artifacts_dir>/<lesson>.zip, its handler
# `<key>.handler` unless `handler` says otherwise; its role, environment and asynchronous-invoke
# settings follow from the entry (the comments on its type).
variable "functions" {
  description = "The lab's Lambda functions, keyed by handler module; each one's role, environment and async settings follow from its entry."
  type = map(object({
    lesson   = string
    handler  = optional(string) # null: "<key>.handler"
    timeout  = optional(number, 10)
    tables   = optional(map(string), {})  # { <key of var.tables> = <level of local.table_actions> } -> <KEY>_TABLE
    invokes  = optional(list(string), []) # [<key of var.functions>]                            -> <KEY>_FUNCTION
    sends    = optional(list(string), []) # [<`_dlq` key of var.queues>]                        -> <KEY>_QUEUE_URL
    starts   = optional(list(string), []) # [<key of var.workflows>]                            -> <KEY>_STATE_MACHINE_ARN
    knows    = optional(list(string), []) # the same variable, without the right to start it
    grants   = optional(list(string), []) # [<key of local.extra_grants>]
    settings = optional(list(string), []) # [<key of local.function_settings>]: module inputs passed on
    env      = optional(map(string), {})  # literal NAME = "value" pairs
    dlq      = optional(string)           # null: the lesson's, local.lesson_dlq
  }))
  nullable = false
  default = {
    # vehicles (lesson 01): vehicle registration.
    rmv_check                = { lesson = "vehicles", timeout = 10 }
    write_vehicle_naive      = { lesson = "vehicles", timeout = 10, tables = { vehicles_naive = "put" } }
    write_vehicle_idempotent = { lesson = "vehicles", timeout = 10, tables = { vehicles = "get_put" } }
    notify                   = { lesson = "vehicles", timeout = 10, tables = { faults = "get_put_update" } }

    # checkout (lesson 02): every checkout charges through card_processor.
    card_processor = { lesson = "checkout", timeout = 10, tables = { ledger = "put", processor_keys = "get_put" } }
    checkout_naive = { lesson = "checkout", timeout = 15, invokes = ["card_processor"] }
    checkout_handrolled = {
      lesson = "checkout", timeout = 15, invokes = ["card_processor"]
      tables = { handrolled_idempotency = "get_put", faults = "get_update" }
    }
    # Powertools' in-progress lease lasts as long as the invocation may: short, so the
    # crash-after-charge demo shows the lease expiring within seconds; not shorter, since a
    # copy stopped after charging leaves its lease to expire and the retry charges again
    # (6 s was passed by cold copies on a loaded two-core machine).
    checkout_powertools = {
      lesson = "checkout", timeout = 15, invokes = ["card_processor"]
      tables = { powertools_idempotency = "idempotency", faults = "get_update" }
    }
    # The same handler with Powertools' local cache on: a row of its own in `make bench`.
    checkout_powertools_cached = {
      lesson = "checkout", handler = "checkout_powertools.handler", timeout = 15, invokes = ["card_processor"]
      tables = { powertools_idempotency = "idempotency", faults = "get_update" }
      env    = { IDEMPOTENCY_LOCAL_CACHE = "true" }
    }

    # deletion (lessons 03 and 04): delayed account deletion.
    request_deletion = {
      lesson = "deletion", timeout = 10, tables = { deletion_requests = "get_put" }, settings = ["deletion_delay"]
      # The schedules it creates start the workflow as Scheduler's role: it needs the ARN, not the right.
      grants = ["create_deletion_schedule"], knows = ["account_deletion"]
    }
    cancel_deletion = {
      lesson = "deletion", timeout = 10, tables = { deletion_requests = "update" }, grants = ["delete_deletion_schedule"]
    }
    claim_deletion = {
      lesson = "deletion", timeout = 10, tables = { deletion_requests = "update", faults = "get_update" }, settings = ["deletion_lease"]
    }
    delete_records = {
      lesson = "deletion", timeout = 30, settings = ["deletion_lease"]
      tables = { deletion_requests = "get_update", user_records = "query_delete", faults = "get_update" }
    }
    delete_files = {
      lesson = "deletion", timeout = 30, grants = ["delete_user_files"], settings = ["deletion_lease"]
      tables = { deletion_requests = "get_update", faults = "get_update" }
    }
    delete_identity = {
      lesson = "deletion", timeout = 10, settings = ["deletion_lease"]
      tables = { deletion_requests = "get_update", identities = "get_delete", faults = "get_update" }
    }
    send_goodbye = {
      lesson = "deletion", timeout = 10, settings = ["deletion_lease"]
      tables = { deletion_requests = "get_update", email_outbox = "put", faults = "get_update" }
    }
    complete_deletion = {
      lesson = "deletion", timeout = 10, sends = ["deletion_dlq"], knows = ["account_deletion"], settings = ["deletion_lease"]
      tables = { deletion_requests = "get_update", faults = "get_update" }
    }
    naive_deletion_worker = {
      lesson = "deletion", timeout = 60, grants = ["delete_user_files"]
      tables = {
        deletion_requests = "get_update", user_records = "query_batch_write", identities = "delete", email_outbox = "put"
        faults            = "get_update"
      }
    }
    sweeper = {
      lesson = "deletion", timeout = 60, tables = { deletion_requests = "query_update" }, sends = ["deletion_dlq"]
      starts = ["account_deletion"], grants = ["put_stuck_metric"], settings = ["deletion_lease"]
    }

    # queues (lesson 06). Each consumer reserves stock for the order lines its queue
    # delivers (var.event_sources). The 2 s timeout keeps the queues' visibility
    # timeout, six times longer, short for the workshop.
    fulfil_naive = { lesson = "queues", timeout = 2, tables = { stock = "update", reservations = "put" } }
    fulfil_idempotent = {
      lesson = "queues", timeout = 2
      tables = { stock = "update", reservations = "put", order_idempotency = "idempotency" }
    }
    fulfil_by_message_id = {
      lesson = "queues", timeout = 2
      tables = { stock = "update", reservations = "put", order_idempotency = "idempotency" }
    }
  }

  validation {
    condition     = alltrue([for key in keys(var.functions) : can(regex("^[a-z][a-z0-9_]*$", key))])
    error_message = "Function keys must be lower_snake_case (they become `<prefix>-<key>` names and `<KEY>_FUNCTION` variables)."
  }

  validation {
    condition     = contains(keys(var.functions), "sweeper")
    error_message = "var.functions must keep `sweeper`: the module's sweeper rule (scheduling.tf) invokes it."
  }

  validation {
    # Lambda allows 1-900 s.
    condition     = alltrue([for f in values(var.functions) : f.timeout >= 1 && f.timeout <= 900 && floor(f.timeout) == f.timeout])
    error_message = "A function's timeout is a whole number of seconds from 1 to 900 (Lambda's limits)."
  }

  # The rules below name the wrong entries. Each builds its list twice, as the same expression:
  # in `condition` and as the last argument of `error_message`. A local cannot hold it: Terraform
  # makes everything that reads var.functions, a local too, wait for these rules, so a rule that
  # read such a local would wait for itself (a cycle; hashicorp/terraform,
  # internal/terraform/transform_variable_validation.go). tests/terraform/test_validations.py
  # holds the two copies equal.
  validation {
    condition = length(flatten([for key, f in var.functions : [
      for t, level in f.tables : "${key}: ${t} = \"${level}\"" if !contains(keys(var.tables), t) || !contains(keys(local.table_actions), level)
    ]])) == 0
    error_message = format(
      "Every table a function lists is a key of var.tables, with an access level of local.table_actions (%s). Wrong: %s.",
      join(", ", keys(local.table_actions)),
      join("; ", flatten([for key, f in var.functions : [
        for t, level in f.tables : "${key}: ${t} = \"${level}\"" if !contains(keys(var.tables), t) || !contains(keys(local.table_actions), level)
      ]])),
    )
  }

  validation {
    condition = length(flatten([for key, f in var.functions : [
      for fn in f.invokes : "${key} invokes ${fn}" if !contains(keys(var.functions), fn)
    ]])) == 0
    error_message = format(
      "Every function a function invokes is a key of var.functions. Wrong: %s.",
      join("; ", flatten([for key, f in var.functions : [
        for fn in f.invokes : "${key} invokes ${fn}" if !contains(keys(var.functions), fn)
      ]])),
    )
  }

  # Functions are created while the work queues still wait on theirs, so they cannot hold a
  # work queue's URL.
  validation {
    condition = length(flatten([for key, f in var.functions : [
      for q in f.sends : "${key} sends to ${q}" if !contains(local.dead_letter_queue_keys, q)
    ]])) == 0
    error_message = format(
      "Every queue a function sends to is a dead-letter queue, a `_dlq` key of var.queues. Wrong: %s.",
      join("; ", flatten([for key, f in var.functions : [
        for q in f.sends : "${key} sends to ${q}" if !contains(local.dead_letter_queue_keys, q)
      ]])),
    )
  }

  validation {
    condition = length(flatten([for key, f in var.functions : [
      for g in f.grants : "${key}: grant ${g}" if !contains(keys(local.extra_grants), g)
    ]])) == 0
    error_message = format(
      "Every grant a function lists is a key of local.extra_grants (%s). Wrong: %s.",
      join(", ", keys(local.extra_grants)),
      join("; ", flatten([for key, f in var.functions : [
        for g in f.grants : "${key}: grant ${g}" if !contains(keys(local.extra_grants), g)
      ]])),
    )
  }

  validation {
    condition = length(flatten([for key, f in var.functions : [
      for n in f.settings : "${key}: settings ${n}" if !contains(keys(local.function_settings), n)
    ]])) == 0
    error_message = format(
      "Every settings name a function lists is a key of local.function_settings (%s). Wrong: %s.",
      join(", ", keys(local.function_settings)),
      join("; ", flatten([for key, f in var.functions : [
        for n in f.settings : "${key}: settings ${n}" if !contains(keys(local.function_settings), n)
      ]])),
    )
  }

  validation {
    condition = length([
      for key, f in var.functions : "${key} (${coalesce(f.dlq, lookup(local.lesson_dlq, f.lesson, "no DLQ for lesson ${f.lesson}"))})"
      if !contains(local.dead_letter_queue_keys, coalesce(f.dlq, lookup(local.lesson_dlq, f.lesson, "-")))
    ]) == 0
    error_message = format(
      "Every function has a dead-letter queue, a `_dlq` key of var.queues: its `dlq`, or its lesson's in local.lesson_dlq. Wrong: %s.",
      join("; ", [
        for key, f in var.functions : "${key} (${coalesce(f.dlq, lookup(local.lesson_dlq, f.lesson, "no DLQ for lesson ${f.lesson}"))})"
        if !contains(local.dead_letter_queue_keys, coalesce(f.dlq, lookup(local.lesson_dlq, f.lesson, "-")))
      ]),
    )
  }
}

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

  function_specs = { for key, f in var.functions : key => merge(f, {
    handler = coalesce(f.handler, "${key}.handler")
    dlq     = coalesce(f.dlq, lookup(local.lesson_dlq, f.lesson, "-"))
  }) }

  # Names the lab itself reads: every function knows the bucket, the schedule group, the
  # scheduler role and the scheduler DLQ, because handlers build their own clients.
  common_env = {
    LAB_PREFIX                   = var.prefix
    USER_FILES_BUCKET            = aws_s3_bucket.this["user_files"].bucket
    SCHEDULE_GROUP               = aws_scheduler_schedule_group.this.name
    SCHEDULER_ROLE_ARN           = aws_iam_role.scheduler.arn
    SCHEDULER_DLQ_ARN            = local.dead_letter_arns["scheduler_dlq"]
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
