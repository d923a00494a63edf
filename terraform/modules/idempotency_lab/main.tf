data "aws_caller_identity" "current" {}
data "aws_region" "current" {}
data "aws_partition" "current" {}

locals {
  account_id = data.aws_caller_identity.current.account_id
  region     = data.aws_region.current.name
  partition  = data.aws_partition.current.partition

  tags = merge({ "idemlab:prefix" = var.prefix }, var.tags)

  # Every name is derived from the prefix and a key; hyphens because S3 allows no underscores.
  # Workflows are named apart: their entries refer to function ARNs, which come from these names.
  name = { for key in concat(keys(local.tables), keys(local.functions), keys(local.queues)) :
    key => "${var.prefix}-${replace(key, "_", "-")}"
  }
  workflow_name = { for key in keys(local.workflows) : key => "${var.prefix}-${replace(key, "_", "-")}" }

  # ARNs computed from names rather than read from resources: functions and workflows refer
  # to each other (a workflow calls functions, the sweeper starts a workflow), and reading
  # the resource attributes would make a dependency cycle.
  function_arn = { for key in keys(local.functions) :
    key => "arn:${local.partition}:lambda:${local.region}:${local.account_id}:function:${local.name[key]}"
  }
  workflow_arn = { for key in keys(local.workflows) :
    key => "arn:${local.partition}:states:${local.region}:${local.account_id}:stateMachine:${local.workflow_name[key]}"
  }
}
