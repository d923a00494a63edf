# Plan-level checks of the module with a mocked AWS provider: nothing is created.
# Run from the module directory with the zips built, e.g.
#   terraform test -var artifacts_dir=../../../build
# (tests/terraform/test_static.py does this with zips it builds itself).

mock_provider "aws" {
  mock_data "aws_caller_identity" {
    defaults = { account_id = "123456789012" }
  }
  mock_data "aws_region" {
    defaults = { name = "us-east-1" }
  }
  mock_data "aws_partition" {
    defaults = { partition = "aws" }
  }
  # Only where the provider checks an ARN's shape; elsewhere the mock's random strings keep
  # each instance distinct, which the checks below rely on.
  mock_resource "aws_iam_role" {
    defaults = { arn = "arn:aws:iam::123456789012:role/mock" }
  }
  mock_resource "aws_lambda_function" {
    defaults = { arn = "arn:aws:lambda:us-east-1:123456789012:function:mock" }
  }
  mock_resource "aws_cloudwatch_event_rule" {
    defaults = { arn = "arn:aws:events:us-east-1:123456789012:rule/mock" }
  }
}

# Distinct queue ARNs, so that "goes to a dead-letter queue" cannot pass by coincidence.
override_resource {
  target = aws_sqs_queue.dead_letter["vehicle_registration_dlq"]
  values = { arn = "arn:aws:sqs:us-east-1:123456789012:tftest-vehicle-registration-dlq" }
}
override_resource {
  target = aws_sqs_queue.dead_letter["checkout_dlq"]
  values = { arn = "arn:aws:sqs:us-east-1:123456789012:tftest-checkout-dlq" }
}
override_resource {
  target = aws_sqs_queue.dead_letter["deletion_dlq"]
  values = { arn = "arn:aws:sqs:us-east-1:123456789012:tftest-deletion-dlq" }
}
override_resource {
  target = aws_sqs_queue.dead_letter["scheduler_dlq"]
  values = { arn = "arn:aws:sqs:us-east-1:123456789012:tftest-scheduler-dlq" }
}
override_resource {
  target = aws_sqs_queue.dead_letter["sweeper_rule_dlq"]
  values = { arn = "arn:aws:sqs:us-east-1:123456789012:tftest-sweeper-rule-dlq" }
}
override_resource {
  target = aws_sqs_queue.dead_letter["order_fulfilment_dlq"]
  values = { arn = "arn:aws:sqs:us-east-1:123456789012:tftest-order-fulfilment-dlq" }
}
override_resource {
  target = aws_sqs_queue.dead_letter["orders_naive_dlq"]
  values = { arn = "arn:aws:sqs:us-east-1:123456789012:tftest-orders-naive-dlq" }
}
override_resource {
  target = aws_sqs_queue.dead_letter["orders_dlq"]
  values = { arn = "arn:aws:sqs:us-east-1:123456789012:tftest-orders-dlq" }
}
override_resource {
  target = aws_sqs_queue.dead_letter["orders_by_message_id_dlq"]
  values = { arn = "arn:aws:sqs:us-east-1:123456789012:tftest-orders-by-message-id-dlq" }
}
override_resource {
  target = aws_sqs_queue.dead_letter["orders_fifo_dlq"]
  values = { arn = "arn:aws:sqs:us-east-1:123456789012:tftest-orders-fifo-dlq.fifo" }
}
override_resource {
  target = aws_sqs_queue.work["orders_naive"]
  values = { arn = "arn:aws:sqs:us-east-1:123456789012:tftest-orders-naive" }
}
override_resource {
  target = aws_sqs_queue.work["orders"]
  values = { arn = "arn:aws:sqs:us-east-1:123456789012:tftest-orders" }
}
override_resource {
  target = aws_sqs_queue.work["orders_by_message_id"]
  values = { arn = "arn:aws:sqs:us-east-1:123456789012:tftest-orders-by-message-id" }
}
override_resource {
  target = aws_sqs_queue.work["orders_fifo"]
  values = { arn = "arn:aws:sqs:us-east-1:123456789012:tftest-orders-fifo.fifo" }
}

variables {
  prefix = "tftest"
}

# The module as designed (default inputs), applied once and checked by every assertion
# below: each run of the mocked stack plans the whole module, so they share one.
run "the_module_as_designed" {
  command = apply

  # Workflows are logged, and Express where designed.
  assert {
    condition = alltrue([for key in ["vehicle_registration_naive", "vehicle_registration_idempotent"] :
      aws_sfn_state_machine.this[key].type == "EXPRESS"
    ])
    error_message = "The vehicle registration workflows must be EXPRESS (at-least-once: the lesson depends on it)."
  }

  assert {
    condition     = aws_sfn_state_machine.this["account_deletion"].type == "STANDARD"
    error_message = "The account deletion workflow must be STANDARD (exactly-once executions, named starts)."
  }

  assert {
    condition = alltrue([for sm in aws_sfn_state_machine.this :
      sm.logging_configuration[0].level == "ALL" && sm.logging_configuration[0].include_execution_data &&
      endswith(sm.logging_configuration[0].log_destination, ":*")
    ])
    error_message = "Every workflow logs ALL with execution data to a log group ARN ending in ':*'."
  }

  # Tables are encrypted, recoverable and on demand.
  assert {
    condition = alltrue([for t in aws_dynamodb_table.this :
      t.server_side_encryption[0].enabled && t.billing_mode == "PAY_PER_REQUEST"
    ])
    error_message = "Every table needs server-side encryption and on-demand billing."
  }

  assert {
    condition = alltrue([for key, t in aws_dynamodb_table.this :
      t.point_in_time_recovery[0].enabled if !contains(["user_records", "identities"], key)
    ])
    error_message = "Every table without personal data has point-in-time recovery."
  }

  assert {
    condition = alltrue([for key in ["user_records", "identities"] :
      !aws_dynamodb_table.this[key].point_in_time_recovery[0].enabled
    ])
    error_message = "By default no backup keeps an erased user restorable: PITR is off on user_records and identities."
  }

  assert {
    condition = (
      aws_dynamodb_table.this["powertools_idempotency"].ttl[0].enabled &&
      aws_dynamodb_table.this["powertools_idempotency"].ttl[0].attribute_name == "expiration"
    )
    error_message = "The Powertools idempotency table expires records through TTL on `expiration`."
  }

  assert {
    condition = toset([
      for g in aws_dynamodb_table.this["deletion_requests"].global_secondary_index : "${g.name}:${g.hash_key}:${coalesce(g.range_key, "-")}"
    ]) == toset(["by_user:user_id:-", "by_status_lease:status:lease_expires_at"])
    error_message = "The sweeper finds stuck requests by Query on by_status_lease (status, lease_expires_at), not by Scan."
  }

  # Every asynchronous path has a dead-letter queue.
  assert {
    condition     = length(aws_lambda_function_event_invoke_config.this) == length(aws_lambda_function.this)
    error_message = "Every function needs an asynchronous invoke config."
  }

  assert {
    condition = alltrue([for c in aws_lambda_function_event_invoke_config.this :
      contains([for q in aws_sqs_queue.dead_letter : q.arn], c.destination_config[0].on_failure[0].destination) &&
      c.maximum_retry_attempts != null && c.maximum_event_age_in_seconds != null
    ])
    error_message = "Every function's failed async invocations go to an SQS dead-letter queue, with explicit retries and event age."
  }

  assert {
    condition     = aws_cloudwatch_event_target.sweeper[0].dead_letter_config[0].arn == aws_sqs_queue.dead_letter["sweeper_rule_dlq"].arn
    error_message = "The sweeper rule's undeliverable events go to its dead-letter queue."
  }

  assert {
    condition = contains(
      flatten([for s in jsondecode(aws_iam_role_policy.scheduler.policy).Statement : s.Resource if contains(flatten([s.Action]), "sqs:SendMessage")]),
      aws_sqs_queue.dead_letter["scheduler_dlq"].arn,
    )
    error_message = "Scheduler's role may send failed deletion starts to the scheduler dead-letter queue."
  }

  assert {
    condition     = alltrue([for q in aws_sqs_queue.dead_letter : q.sqs_managed_sse_enabled])
    error_message = "Every dead-letter queue is encrypted."
  }

  # Alarms watch every dead-letter queue and stuck requests.
  assert {
    condition     = toset(keys(aws_cloudwatch_metric_alarm.dlq_not_empty)) == toset(keys(aws_sqs_queue.dead_letter))
    error_message = "Every dead-letter queue has a not-empty alarm."
  }

  assert {
    condition = alltrue([for a in aws_cloudwatch_metric_alarm.dlq_not_empty :
      a.metric_name == "ApproximateNumberOfMessagesVisible" && a.comparison_operator == "GreaterThanThreshold" && a.threshold == 0
    ])
    error_message = "A dead-letter alarm fires on the first visible message."
  }

  assert {
    condition = (
      aws_cloudwatch_metric_alarm.stuck_processing[0].namespace == output.stuck_metric.namespace &&
      aws_cloudwatch_metric_alarm.stuck_processing[0].metric_name == output.stuck_metric.name
    )
    error_message = "The stuck-PROCESSING alarm watches the metric the sweeper is told to publish."
  }

  # IAM is least privilege.
  assert {
    condition = (
      keys(aws_iam_role.function) == keys(aws_lambda_function.this) &&
      length(distinct([for r in aws_iam_role.function : r.name])) == length(aws_lambda_function.this)
    )
    error_message = "Every function has a role of its own."
  }

  assert {
    condition = alltrue(flatten([
      for p in concat(values(aws_iam_role_policy.function), values(aws_iam_role_policy.workflow), [aws_iam_role_policy.scheduler]) : [
        for s in jsondecode(p.policy).Statement : alltrue([for a in flatten([s.Action]) : !strcontains(a, "*")]) if s.Effect == "Allow"
      ]
    ]))
    error_message = "No IAM statement allows a wildcard action."
  }

  assert {
    condition = alltrue(flatten([
      for p in concat(values(aws_iam_role_policy.function), values(aws_iam_role_policy.workflow), [aws_iam_role_policy.scheduler]) : [
        for s in jsondecode(p.policy).Statement : !(
          contains(flatten([s.Resource]), "*") &&
          anytrue([for a in flatten([s.Action]) : can(regex("^(dynamodb|s3|sqs|lambda|states|scheduler):", a))])
        )
      ]
    ]))
    error_message = "No IAM statement grants a data service (DynamoDB, S3, SQS, Lambda, Step Functions, Scheduler) on Resource \"*\"."
  }

  assert {
    condition = alltrue([for key, p in aws_iam_role_policy.function :
      contains(flatten([for s in jsondecode(p.policy).Statement : s.Resource]), "${aws_cloudwatch_log_group.function[key].arn}:*")
    ])
    error_message = "Every function may write to its own log group."
  }

  assert {
    condition = !contains(
      flatten([for s in jsondecode(aws_iam_role_policy.function["checkout_naive"].policy).Statement : s.Resource]),
      aws_dynamodb_table.this["ledger"].arn,
    )
    error_message = "A checkout reaches the ledger only through card_processor."
  }

  # Outputs follow the design.
  assert {
    condition = toset(keys(output.lab)) == toset([
      "region", "tables", "functions", "function_arns", "state_machines", "queues", "queue_arns",
      "buckets", "schedule_group", "scheduler_role_arn", "alarms",
    ])
    error_message = "The lab output has exactly the keys of docs/DESIGN.md."
  }

  assert {
    condition     = alltrue([for name in values(output.lab.tables) : startswith(name, "tftest-")])
    error_message = "Every name carries the prefix."
  }

  # Workflow roles may trace with X-Ray.
  assert {
    condition = alltrue([for p in aws_iam_role_policy.workflow :
      length(setsubtract(
        ["xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules", "xray:GetSamplingTargets"],
        flatten([for s in jsondecode(p.policy).Statement : s.Action if s.Effect == "Allow" && contains(flatten([s.Resource]), "*")]),
      )) == 0
    ])
    error_message = "A traced state machine's role needs xray:PutTraceSegments, PutTelemetryRecords, GetSamplingRules and GetSamplingTargets on \"*\"."
  }

  # Queue consumers poll only their own queue.
  assert {
    condition = alltrue([for key, e in var.event_sources :
      aws_lambda_event_source_mapping.sqs[key].event_source_arn == aws_sqs_queue.work[e.queue].arn &&
      contains(aws_lambda_event_source_mapping.sqs[key].function_response_types, "ReportBatchItemFailures") == e.report_batch_item_failures
    ])
    error_message = "Each mapping reads its own queue and reports batch item failures exactly where the consumer returns them."
  }

  assert {
    condition = alltrue([for key, e in var.event_sources :
      aws_sqs_queue.work[e.queue].visibility_timeout_seconds >= 6 * aws_lambda_function.this[e.function].timeout
    ])
    error_message = "Every mapped queue's visibility timeout is at least six times its function's timeout."
  }

  assert {
    condition = alltrue([for key, p in aws_iam_role_policy.function : alltrue([
      for s in jsondecode(p.policy).Statement :
      toset(flatten([s.Resource])) == toset([for e in values(var.event_sources) : aws_sqs_queue.work[e.queue].arn if e.function == key])
      if contains(flatten([s.Action]), "sqs:ReceiveMessage")
    ])])
    error_message = "A function may receive only from the queues mapped to it."
  }

  assert {
    condition = (
      aws_sqs_queue.work["orders_fifo"].fifo_queue && aws_sqs_queue.work["orders_fifo"].content_based_deduplication &&
      aws_sqs_queue.dead_letter["orders_fifo_dlq"].fifo_queue
    )
    error_message = "The FIFO queue deduplicates by content, and its dead-letter queue is FIFO too."
  }
}

run "personal_data_keeps_only_the_recovery_period_asked_for" {
  command = plan

  variables {
    personal_data_recovery_days = 7
  }

  assert {
    condition = alltrue([for key in ["user_records", "identities"] :
      aws_dynamodb_table.this[key].point_in_time_recovery[0].enabled &&
      aws_dynamodb_table.this[key].point_in_time_recovery[0].recovery_period_in_days == 7
    ])
    error_message = "personal_data_recovery_days = 7 turns PITR on for the personal-data tables with a 7-day period."
  }
}

run "a_recovery_period_dynamodb_refuses_is_refused" {
  command = plan

  variables {
    personal_data_recovery_days = 36
  }

  expect_failures = [var.personal_data_recovery_days]
}

run "role_names_carry_the_region_and_fit_iam" {
  command = plan

  # The longest prefix the module accepts, in a region with a long name.
  variables {
    prefix = "abcdefghij-klmnopqrs"
  }
  override_data {
    target = data.aws_region.current
    values = { name = "ap-southeast-4" }
  }

  assert {
    condition = alltrue([
      for name in concat([for r in aws_iam_role.function : r.name], [for r in aws_iam_role.workflow : r.name], [aws_iam_role.scheduler.name]) :
      strcontains(name, "-apse4-") && length(name) <= 64
    ])
    error_message = "Every IAM role name carries the region (ap-southeast-4 -> apse4) and has at most 64 characters, even with a 20-character prefix."
  }

  assert {
    condition     = aws_iam_role.workflow["vehicle_registration_idempotent"].name == "abcdefghij-klmnopqrs-vehicle-registration-idempotent-apse4-sfn"
    error_message = "The longest role name is the idempotent vehicle workflow's."
  }
}

run "a_role_name_iam_would_refuse_stops_the_plan" {
  command = plan

  variables {
    prefix = "abcdefghij-klmnopqrs"
  }
  override_data {
    target = data.aws_region.current
    values = { name = "eusc-de-east-1" }
  }

  expect_failures = [aws_iam_role.workflow]
}

run "a_bad_prefix_is_refused" {
  command = plan

  variables {
    prefix = "Bad_Prefix"
  }

  expect_failures = [var.prefix]
}

# The lesson maps are typed inputs: what AWS or the module itself would refuse later stops
# the plan at the variable, naming the entry (tests/terraform/test_static.py and
# tests/terraform/test_validations.py read the messages).
run "a_function_naming_a_table_that_does_not_exist_is_refused" {
  command = plan

  variables {
    functions = {
      sweeper = { lesson = "deletion", tables = { deletion_request = "query_update" } }
    }
  }

  expect_failures = [var.functions]
}

run "a_fifo_queue_redriving_to_a_standard_queue_is_refused" {
  command = plan

  variables {
    queues = {
      scheduler_dlq    = {}
      sweeper_rule_dlq = {}
      orders_fifo      = { redrive = { dlq = "orders_dlq", max_receive_count = 2 }, fifo = true }
      orders_dlq       = {}
    }
  }

  expect_failures = [var.queues]
}

run "a_queue_hiding_messages_for_less_than_six_function_timeouts_is_refused" {
  command = plan

  variables {
    event_sources = {
      orders = { function = "sweeper", queue = "orders" }
    }
  }

  expect_failures = [var.event_sources]
}

run "a_workflow_invoking_a_function_that_does_not_exist_is_refused" {
  command = plan

  variables {
    workflows = {
      account_deletion = { type = "STANDARD", definition = "account_deletion.asl.json", invokes = ["claim_deletions"] }
    }
  }

  expect_failures = [var.workflows]
}

# Every other validation rule, one refused input each. A run names the variable whose rule
# refuses it; tests/terraform/test_validations.py checks that every rule has a run here, and
# that the rules naming entries name them.

run "a_blank_artifacts_dir_is_refused" {
  command = plan

  variables {
    artifacts_dir = " "
  }

  expect_failures = [var.artifacts_dir]
}

run "a_runtime_the_module_does_not_offer_is_refused" {
  command = plan

  variables {
    lambda_runtime = "python3.9"
  }

  expect_failures = [var.lambda_runtime]
}

run "memory_lambda_refuses_is_refused" {
  command = plan

  variables {
    lambda_memory_mb = 64
  }

  expect_failures = [var.lambda_memory_mb]
}

run "more_async_retries_than_lambda_allows_are_refused" {
  command = plan

  variables {
    async_maximum_retry_attempts = 3
  }

  expect_failures = [var.async_maximum_retry_attempts]
}

run "an_async_event_age_lambda_refuses_is_refused" {
  command = plan

  variables {
    async_maximum_event_age_seconds = 30
  }

  expect_failures = [var.async_maximum_event_age_seconds]
}

run "a_log_retention_cloudwatch_refuses_is_refused" {
  command = plan

  variables {
    log_retention_days = 10
  }

  expect_failures = [var.log_retention_days]
}

run "a_fractional_deletion_delay_is_refused" {
  command = plan

  variables {
    deletion_delay_seconds = 1.5
  }

  expect_failures = [var.deletion_delay_seconds]
}

run "a_zero_deletion_lease_is_refused" {
  command = plan

  variables {
    deletion_lease_seconds = 0
  }

  expect_failures = [var.deletion_lease_seconds]
}

run "more_deletion_attempts_than_the_module_allows_are_refused" {
  command = plan

  variables {
    deletion_max_attempts = 21
  }

  expect_failures = [var.deletion_max_attempts]
}

run "a_sweeper_schedule_that_is_no_rate_or_cron_expression_is_refused" {
  command = plan

  variables {
    sweeper_schedule_expression = "every 5 minutes"
  }

  expect_failures = [var.sweeper_schedule_expression]
}

run "an_aws_metric_namespace_is_refused" {
  command = plan

  variables {
    stuck_metric_namespace = "AWS/Lambda"
  }

  expect_failures = [var.stuck_metric_namespace]
}

run "an_alarm_action_that_is_no_arn_is_refused" {
  command = plan

  variables {
    alarm_actions = ["alerts-topic"]
  }

  expect_failures = [var.alarm_actions]
}

run "a_table_key_that_is_not_snake_case_is_refused" {
  command = plan

  variables {
    tables = { "deletion-requests" = { hash_key = "deletion_request_id" } }
  }

  expect_failures = [var.tables]
}

run "an_attribute_type_dynamodb_does_not_know_is_refused" {
  command = plan

  variables {
    tables = { faults = { hash_key = "fault_key", types = { fault_key = "STRING" } } }
  }

  expect_failures = [var.tables]
}

run "a_type_for_an_attribute_no_key_uses_is_refused" {
  command = plan

  variables {
    tables = { faults = { hash_key = "fault_key", types = { remaining = "N" } } }
  }

  expect_failures = [var.tables]
}

run "a_function_key_that_is_not_snake_case_is_refused" {
  command = plan

  variables {
    functions = {
      sweeper          = { lesson = "deletion" }
      "claim-deletion" = { lesson = "deletion" }
    }
  }

  expect_failures = [var.functions]
}

run "functions_without_the_sweeper_are_refused" {
  command = plan

  variables {
    functions = {
      sweep = { lesson = "deletion" }
    }
  }

  expect_failures = [var.functions]
}

run "a_function_timeout_lambda_refuses_is_refused" {
  command = plan

  variables {
    functions = {
      sweeper = { lesson = "deletion", timeout = 901 }
    }
  }

  expect_failures = [var.functions]
}

run "a_function_invoking_a_function_that_does_not_exist_is_refused" {
  command = plan

  variables {
    functions = {
      sweeper = { lesson = "deletion", invokes = ["complete_deletions"] }
    }
  }

  expect_failures = [var.functions]
}

run "a_function_sending_to_a_work_queue_is_refused" {
  command = plan

  variables {
    functions = {
      sweeper = { lesson = "deletion", sends = ["orders"] }
    }
  }

  expect_failures = [var.functions]
}

run "a_grant_that_does_not_exist_is_refused" {
  command = plan

  variables {
    functions = {
      sweeper = { lesson = "deletion", grants = ["put_metric"] }
    }
  }

  expect_failures = [var.functions]
}

run "a_settings_name_that_does_not_exist_is_refused" {
  command = plan

  variables {
    functions = {
      sweeper = { lesson = "deletion", settings = ["deletion_leases"] }
    }
  }

  expect_failures = [var.functions]
}

run "a_function_without_a_dead_letter_queue_is_refused" {
  command = plan

  variables {
    functions = {
      sweeper = { lesson = "deletions" }
    }
  }

  expect_failures = [var.functions]
}

run "a_workflow_key_that_is_not_snake_case_is_refused" {
  command = plan

  variables {
    workflows = {
      account_deletion       = { type = "STANDARD", definition = "account_deletion.asl.json", invokes = [] }
      "vehicle-registration" = { type = "EXPRESS", definition = "vehicle_registration.asl.json", invokes = [] }
    }
  }

  expect_failures = [var.workflows]
}

run "workflows_without_account_deletion_are_refused" {
  command = plan

  variables {
    workflows = {
      deletion = { type = "STANDARD", definition = "account_deletion.asl.json", invokes = [] }
    }
  }

  expect_failures = [var.workflows]
}

run "a_workflow_type_step_functions_does_not_know_is_refused" {
  command = plan

  variables {
    workflows = {
      account_deletion = { type = "Standard", definition = "account_deletion.asl.json", invokes = [] }
    }
  }

  expect_failures = [var.workflows]
}

run "a_workflow_naming_a_table_access_level_that_does_not_exist_is_refused" {
  command = plan

  variables {
    workflows = {
      account_deletion = { type = "STANDARD", definition = "account_deletion.asl.json", invokes = [], tables = { deletion_requests = "write" } }
    }
  }

  expect_failures = [var.workflows]
}

run "a_function_starting_a_workflow_that_does_not_exist_is_refused" {
  command = plan

  variables {
    functions = {
      sweeper = { lesson = "deletion", starts = ["account_deletions"] }
    }
    workflows = {
      account_deletion = { type = "STANDARD", definition = "account_deletion.asl.json", invokes = [] }
    }
    event_sources = {}
  }

  expect_failures = [var.workflows]
}

run "a_workflow_definition_that_is_no_file_is_refused" {
  command = plan

  variables {
    workflows = {
      account_deletion = { type = "STANDARD", definition = "account_deletion.json", invokes = [] }
    }
  }

  expect_failures = [var.workflows]
}

run "an_event_source_naming_a_function_that_does_not_exist_is_refused" {
  command = plan

  variables {
    event_sources = {
      orders = { function = "fulfil_idempotents", queue = "orders" }
    }
  }

  expect_failures = [var.event_sources]
}

run "a_batching_window_lambda_refuses_is_refused" {
  command = plan

  variables {
    event_sources = {
      orders = { function = "fulfil_idempotent", queue = "orders", batching_window_seconds = 301 }
    }
  }

  expect_failures = [var.event_sources]
}

run "a_queue_key_that_is_not_snake_case_is_refused" {
  command = plan

  variables {
    queues = {
      scheduler_dlq    = {}
      sweeper_rule_dlq = {}
      "orders-dlq"     = {}
    }
  }

  expect_failures = [var.queues]
}

run "queues_without_the_modules_own_dead_letter_queues_are_refused" {
  command = plan

  variables {
    queues = {
      scheduler_dlq = {}
    }
  }

  expect_failures = [var.queues]
}

run "a_queue_setting_sqs_refuses_is_refused" {
  command = plan

  variables {
    queues = {
      scheduler_dlq    = {}
      sweeper_rule_dlq = { retention_seconds = 30 }
    }
  }

  expect_failures = [var.queues]
}

run "more_tags_than_an_s3_object_takes_are_refused" {
  command = plan

  variables {
    # Nine of the caller's, the module's idemlab:prefix and each zip's Name: 11 on an object.
    tags = { a = "1", b = "2", c = "3", d = "4", e = "5", f = "6", g = "7", h = "8", i = "9" }
  }

  expect_failures = [var.tags]
}

run "the_providers_default_tags_count_against_an_objects_ten" {
  command = plan

  variables {
    tags = { a = "1", b = "2", c = "3", d = "4", e = "5", f = "6" }
  }

  override_data {
    target = data.aws_default_tags.current
    values = { tags = { project = "p", owner = "o", team = "t" } }
  }

  expect_failures = [aws_s3_object.code]
}

run "a_key_used_by_a_table_and_a_function_is_refused" {
  command = plan

  variables {
    functions     = { sweeper = { lesson = "deletion" }, ledger = { lesson = "checkout" } }
    event_sources = {}
  }

  expect_failures = [var.workflows]
}

run "service_integrations_name_the_providers_partition" {
  command = plan

  override_data {
    target = data.aws_partition.current
    values = { partition = "aws-cn" }
  }

  assert {
    condition     = strcontains(aws_sfn_state_machine.this["vehicle_registration_native"].definition, "\"arn:aws-cn:states:::dynamodb:putItem\"")
    error_message = "The native workflow's PutItem task must be named in the provider's partition."
  }

  assert {
    condition     = !strcontains(aws_sfn_state_machine.this["vehicle_registration_native"].definition, "arn:aws:")
    error_message = "No ARN of the native workflow may name the aws partition when the provider is in another."
  }
}

run "every_role_takes_the_path_and_permissions_boundary_asked_for" {
  command = plan

  variables {
    role_path                 = "/workshop/"
    role_permissions_boundary = "arn:aws:iam::123456789012:policy/workshop-boundary"
  }

  assert {
    condition = alltrue([
      for role in concat(values(aws_iam_role.function), values(aws_iam_role.workflow), [aws_iam_role.scheduler]) :
      role.path == "/workshop/" && role.permissions_boundary == "arn:aws:iam::123456789012:policy/workshop-boundary"
    ])
    error_message = "Every IAM role of the module must carry var.role_path and var.role_permissions_boundary."
  }
}

run "a_role_path_iam_refuses_is_refused" {
  command = plan

  variables {
    role_path = "workshop"
  }

  expect_failures = [var.role_path]
}

run "a_permissions_boundary_that_is_no_policy_arn_is_refused" {
  command = plan

  variables {
    role_permissions_boundary = "workshop-boundary"
  }

  expect_failures = [var.role_permissions_boundary]
}

run "two_lessons_provision_only_their_resources" {
  command = plan

  variables {
    lessons = ["vehicles", "keys"]
  }

  assert {
    condition     = toset([for f in values(aws_lambda_function.this) : f.tags["idemlab:lesson"]]) == toset(["vehicles", "checkout"])
    error_message = "vehicles and keys (which builds on the checkout) provision the vehicles' and the checkout's functions, no others."
  }

  assert {
    condition = toset(keys(aws_dynamodb_table.this)) == toset([
      "faults", "handrolled_idempotency", "ledger", "powertools_idempotency", "processor_keys", "vehicles", "vehicles_naive", "vehicles_native",
    ])
    error_message = "Only the tables the chosen lessons use are provisioned; faults is shared."
  }

  assert {
    condition     = keys(aws_sqs_queue.dead_letter) == ["checkout_dlq", "vehicle_registration_dlq"] && length(aws_sqs_queue.work) == 0
    error_message = "Only the chosen lessons' queues are provisioned."
  }

  assert {
    condition     = length(aws_cloudwatch_event_rule.sweeper) == 0 && length(aws_cloudwatch_metric_alarm.sweeper_stopped) == 0
    error_message = "Without the deletion lesson there is no sweeper, no sweeper rule and no sweeper alarm."
  }

  assert {
    condition     = keys(aws_sfn_state_machine.this) == ["vehicle_registration_idempotent", "vehicle_registration_naive", "vehicle_registration_native"]
    error_message = "Only the vehicles' workflows are provisioned."
  }

  assert {
    condition     = keys(aws_s3_object.code) == ["checkout", "vehicles"]
    error_message = "One zip per lesson folder of the chosen functions."
  }
}

run "durable_alone_provisions_the_deletion_tables_it_shares" {
  command = plan

  variables {
    lessons = ["durable"]
  }

  assert {
    condition     = keys(aws_dynamodb_table.this) == ["email_outbox", "faults", "identities", "user_records"]
    error_message = "Lesson 09 erases a user from the deletion's user tables, with faults: those exist, nothing else."
  }

  assert {
    condition     = length(aws_lambda_function.this) == 0 && length(aws_sqs_queue.dead_letter) == 0
    error_message = "Lesson 09's functions are not in the module yet: none is provisioned."
  }
}

run "a_lesson_that_does_not_exist_is_refused" {
  command = plan

  variables {
    lessons = ["vehicle"]
  }

  expect_failures = [var.lessons]
}
