data "aws_caller_identity" "current" {}
data "aws_region" "current" {}
data "aws_partition" "current" {}
# The provider's default_tags, which it adds to every object too (counted in storage.tf).
data "aws_default_tags" "current" {}

locals {
  account_id = data.aws_caller_identity.current.account_id
  region     = data.aws_region.current.name
  partition  = data.aws_partition.current.partition

  # IAM role names are global to the account, unlike every other name here: the same prefix
  # applied in a second region would collide (EntityAlreadyExists). Role names therefore
  # carry the region, shortened (us-east-1 -> use1, ap-southeast-4 -> apse4) to keep
  # within IAM's 64 characters; iam.tf checks the length of each name.
  region_words = {
    north     = "n", south = "s", east = "e", west = "w", central = "c",
    northeast = "ne", northwest = "nw", southeast = "se", southwest = "sw", gov = "g",
  }
  region_code = join("", [for part in split("-", local.region) : lookup(local.region_words, part, part)])

  # Every lesson slug var.lessons may name, and the lessons whose resources it also needs:
  # notebook 07 (keys) deploys variants of the checkout's functions and calls its card
  # processor. An entry of the lesson maps is provisioned when its lesson (functions,
  # workflows, event_sources) or one of its lessons (tables, queues) is chosen, or, where
  # it names none, always.
  lesson_builds_on = {
    vehicles = [], checkout = [], deletion = [], queues = [], keys = ["checkout"], capstone = [], durable = [],
  }
  chosen_lessons = setunion(var.lessons, flatten([for lesson in var.lessons : local.lesson_builds_on[lesson]]))

  # The tags the module itself puts on every resource, besides each one's Name; var.tags may
  # override them. S3 allows 10 tags on an object (S3 user guide, "Categorizing your objects
  # using tags", https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-tagging.html):
  # var.tags' validation and the function zips' precondition (storage.tf) count against it.
  module_tags         = { "idemlab:prefix" = var.prefix }
  tags                = merge(local.module_tags, var.tags)
  s3_object_tag_limit = 10

  # Every name is derived from the prefix and a key; hyphens because S3 allows no underscores.
  # Workflows are named apart: their entries refer to function ARNs, which come from these names.
  # distinct: a key in two maps is var.workflows' validation's to refuse, with a message
  # that names it, not this expression's ("Duplicate object key").
  name = { for key in distinct(concat(keys(var.tables), keys(var.functions), keys(var.queues))) :
    key => "${var.prefix}-${replace(key, "_", "-")}"
  }
  workflow_name = { for key in keys(var.workflows) : key => "${var.prefix}-${replace(key, "_", "-")}" }

  # ARNs computed from names rather than read from resources: functions and workflows refer
  # to each other (a workflow calls functions, the sweeper starts a workflow), and reading
  # the resource attributes would make a dependency cycle.
  function_arn = { for key in keys(var.functions) :
    key => "arn:${local.partition}:lambda:${local.region}:${local.account_id}:function:${local.name[key]}"
  }
  workflow_arn = { for key in keys(var.workflows) :
    key => "arn:${local.partition}:states:${local.region}:${local.account_id}:stateMachine:${local.workflow_name[key]}"
  }
}
