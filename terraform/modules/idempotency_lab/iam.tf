locals {
  # Access levels a function or workflow entry may ask for on a table, each named by the calls
  # it allows and holding nothing else. An entry names the level of exactly the calls its code
  # makes on that table (tests/terraform/test_iam_from_code.py reads them from the code and
  # compares them with the deployed roles). A
  # TransactWriteItems action is authorised as the PutItem, UpdateItem, DeleteItem or
  # ConditionCheckItem it stands for (DynamoDB developer guide, "Using IAM with DynamoDB
  # transactions"); boto3's batch writer calls BatchWriteItem. A level with Query also covers
  # the table's indexes.
  table_actions = {
    read              = ["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:ConditionCheckItem"]
    put               = ["dynamodb:PutItem"]
    update            = ["dynamodb:UpdateItem"]
    delete            = ["dynamodb:DeleteItem"]
    get_put           = ["dynamodb:GetItem", "dynamodb:PutItem"]
    get_update        = ["dynamodb:GetItem", "dynamodb:UpdateItem"]
    get_delete        = ["dynamodb:GetItem", "dynamodb:DeleteItem"]
    get_put_update    = ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"]
    query_update      = ["dynamodb:Query", "dynamodb:UpdateItem"]
    query_delete      = ["dynamodb:Query", "dynamodb:DeleteItem"]
    query_batch_write = ["dynamodb:Query", "dynamodb:BatchWriteItem"]
    # What the Powertools DynamoDB persistence layer calls (its
    # aws_lambda_powertools/utilities/idempotency/persistence/dynamodb.py: get_item, put_item,
    # update_item, delete_item).
    idempotency = ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"]
  }

  schedule_arn_in_group = "arn:${local.partition}:scheduler:${local.region}:${local.account_id}:schedule/${aws_scheduler_schedule_group.this.name}/*"

  # Named grants beyond tables, functions, queues and workflows; a function entry lists them in `grants`.
  extra_grants = {
    create_deletion_schedule = [
      { Effect = "Allow", Action = ["scheduler:CreateSchedule"], Resource = [local.schedule_arn_in_group] },
      # CreateSchedule passes the schedule's execution role to Scheduler.
      {
        Effect    = "Allow", Action = ["iam:PassRole"], Resource = [aws_iam_role.scheduler.arn]
        Condition = { StringEquals = { "iam:PassedToService" = "scheduler.amazonaws.com" } }
      },
    ]
    delete_deletion_schedule = [
      { Effect = "Allow", Action = ["scheduler:DeleteSchedule"], Resource = [local.schedule_arn_in_group] },
    ]
    # ListObjectsV2 is authorised as s3:ListBucket, DeleteObjects as s3:DeleteObject per object.
    delete_user_files = [
      { Effect = "Allow", Action = ["s3:ListBucket"], Resource = [aws_s3_bucket.this["user_files"].arn] },
      { Effect = "Allow", Action = ["s3:DeleteObject"], Resource = ["${aws_s3_bucket.this["user_files"].arn}/*"] },
    ]
    put_stuck_metric = [
      # AWS defines no resource type for cloudwatch:PutMetricData, so a statement allowing it
      # must say Resource "*" (Service Authorization Reference, list_amazoncloudwatch.html); the
      # cloudwatch:namespace condition pins it to the lab's namespace (CloudWatch user guide,
      # iam-cw-condition-keys-namespace.html).
      {
        Effect    = "Allow", Action = ["cloudwatch:PutMetricData"], Resource = ["*"]
        Condition = { StringEquals = { "cloudwatch:namespace" = var.stuck_metric_namespace } }
      },
    ]
  }

  # AWS defines no resource type for xray:PutTraceSegments and xray:PutTelemetryRecords, so they
  # take Resource "*" (Service Authorization Reference, list_awsx-ray.html); active tracing sends
  # a function's segments with them as its role (Lambda developer guide, services-xray.html).
  xray_statement = { Effect = "Allow", Action = ["xray:PutTraceSegments", "xray:PutTelemetryRecords"], Resource = ["*"] }
  # A traced state machine also reads the sampling rules (Step Functions developer guide,
  # "IAM policies for using AWS X-Ray in Step Functions",
  # https://docs.aws.amazon.com/step-functions/latest/dg/xray-iam.html).
  workflow_xray_statement = {
    Effect   = "Allow"
    Action   = ["xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules", "xray:GetSamplingTargets"]
    Resource = ["*"]
  }

  # IAM role names: account-wide, 64 characters at most (see local.region_code).
  iam_role_name_limit = 64
  function_role_name  = { for key in keys(local.function_specs) : key => "${local.name[key]}-${local.region_code}-fn" }
  workflow_role_name  = { for key in keys(local.workflow_specs) : key => "${local.workflow_name[key]}-${local.region_code}-sfn" }
  scheduler_role_name = "${var.prefix}-${local.region_code}-scheduler"
  role_name_too_long  = "is longer than IAM's 64 characters: choose a shorter prefix"

  consumed_queues = { for key in keys(local.function_specs) : key => distinct([for e in values(var.event_sources) : e.queue if e.function == key]) }

  function_statements = { for key, f in local.function_specs : key => flatten([
    [{ Effect = "Allow", Action = ["logs:CreateLogStream", "logs:PutLogEvents"], Resource = ["${aws_cloudwatch_log_group.function[key].arn}:*"] }],
    [local.xray_statement],
    [for table, level in f.tables : { Effect = "Allow", Action = local.table_actions[level], Resource = [aws_dynamodb_table.this[table].arn] }],
    # Querying an index is authorised on the index's ARN, and no other call of the levels acts on one.
    [for table, level in f.tables : {
      Effect   = "Allow"
      Action   = ["dynamodb:Query"]
      Resource = [for g in var.tables[table].gsis : "${aws_dynamodb_table.this[table].arn}/index/${g.name}"]
    } if contains(local.table_actions[level], "dynamodb:Query") && length(var.tables[table].gsis) > 0],
    length(f.invokes) == 0 ? [] : [{ Effect = "Allow", Action = ["lambda:InvokeFunction"], Resource = [for fn in f.invokes : local.function_arn[fn]] }],
    [{ Effect = "Allow", Action = ["sqs:SendMessage"], Resource = [for q in distinct(concat([f.dlq], f.sends)) : local.queue_arn[q]] }],
    # Its event source mappings poll as the function's role (Lambda developer guide, with-sqs.html).
    length(local.consumed_queues[key]) == 0 ? [] : [{
      Effect   = "Allow"
      Action   = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"]
      Resource = [for q in local.consumed_queues[key] : local.queue_arn[q]]
    }],
    length(f.starts) == 0 ? [] : [{ Effect = "Allow", Action = ["states:StartExecution"], Resource = [for w in f.starts : local.workflow_arn[w]] }],
    [for grant in f.grants : local.extra_grants[grant]],
  ]) }
}

resource "aws_iam_role" "function" {
  for_each = local.function_specs

  name = local.function_role_name[each.key]
  assume_role_policy = jsonencode({
    Version   = "2012-10-17"
    Statement = [{ Effect = "Allow", Action = "sts:AssumeRole", Principal = { Service = "lambda.amazonaws.com" } }]
  })

  # Where an account's policies want them (variables.tf).
  path                 = var.role_path
  permissions_boundary = var.role_permissions_boundary

  tags = merge(local.tags, { Name = local.function_role_name[each.key] })

  lifecycle {
    precondition {
      condition     = length(local.function_role_name[each.key]) <= local.iam_role_name_limit
      error_message = "IAM role name ${local.function_role_name[each.key]} ${local.role_name_too_long}."
    }
  }
}

resource "aws_iam_role_policy" "function" {
  for_each = local.function_specs

  name   = "least-privilege"
  role   = aws_iam_role.function[each.key].id
  policy = jsonencode({ Version = "2012-10-17", Statement = local.function_statements[each.key] })
}

resource "aws_iam_role" "workflow" {
  for_each = local.workflow_specs

  name = local.workflow_role_name[each.key]
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow", Action = "sts:AssumeRole", Principal = { Service = "states.amazonaws.com" }
      Condition = { StringEquals = { "aws:SourceAccount" = local.account_id } }
    }]
  })

  # Where an account's policies want them (variables.tf).
  path                 = var.role_path
  permissions_boundary = var.role_permissions_boundary

  tags = merge(local.tags, { Name = local.workflow_role_name[each.key] })

  lifecycle {
    precondition {
      condition     = length(local.workflow_role_name[each.key]) <= local.iam_role_name_limit
      error_message = "IAM role name ${local.workflow_role_name[each.key]} ${local.role_name_too_long}."
    }
  }
}

resource "aws_iam_role_policy" "workflow" {
  for_each = local.workflow_specs

  name = "least-privilege"
  role = aws_iam_role.workflow[each.key].id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = flatten([
      [{ Effect = "Allow", Action = ["lambda:InvokeFunction"], Resource = [for fn in each.value.invokes : local.function_arn[fn]] }],
      [for table, level in each.value.tables : {
        Effect = "Allow", Action = local.table_actions[level], Resource = [aws_dynamodb_table.this[table].arn]
      }],
      [local.workflow_xray_statement],
      # Log delivery for Step Functions is configured through these account-level calls,
      # which accept no resource-level permissions (Step Functions developer guide, "Logging").
      [{
        Effect = "Allow"
        Action = [
          "logs:CreateLogDelivery", "logs:GetLogDelivery", "logs:UpdateLogDelivery", "logs:DeleteLogDelivery",
          "logs:ListLogDeliveries", "logs:PutResourcePolicy", "logs:DescribeResourcePolicies", "logs:DescribeLogGroups",
        ]
        Resource = ["*"]
      }],
    ])
  })
}

resource "aws_iam_role" "scheduler" {
  name = local.scheduler_role_name
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow", Action = "sts:AssumeRole", Principal = { Service = "scheduler.amazonaws.com" }
      Condition = { StringEquals = { "aws:SourceAccount" = local.account_id } }
    }]
  })

  # Where an account's policies want them (variables.tf).
  path                 = var.role_path
  permissions_boundary = var.role_permissions_boundary

  tags = merge(local.tags, { Name = local.scheduler_role_name })

  lifecycle {
    precondition {
      condition     = length(local.scheduler_role_name) <= local.iam_role_name_limit
      error_message = "IAM role name ${local.scheduler_role_name} ${local.role_name_too_long}."
    }
  }
}

resource "aws_iam_role_policy" "scheduler" {
  name = "start-account-deletion"
  role = aws_iam_role.scheduler.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      { Effect = "Allow", Action = ["states:StartExecution"], Resource = [local.workflow_arn["account_deletion"]] },
      { Effect = "Allow", Action = ["sqs:SendMessage"], Resource = [local.queue_arn["scheduler_dlq"]] },
    ]
  })
}
