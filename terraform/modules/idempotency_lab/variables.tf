variable "prefix" {
  description = "Prefix of every resource name, so several copies of the lab can live in one account."
  type        = string
  default     = "lab"

  validation {
    # Bucket names are the strictest consumer: lower case, digits and hyphens. This regex is
    # the rule's only copy: the harness (idemlab/settings.py) reads it from here.
    condition     = can(regex("^[a-z]([a-z0-9-]{0,18}[a-z0-9])?$", var.prefix))
    error_message = "prefix must be 1-20 characters of a-z, 0-9 and '-', start with a letter and not end with '-'."
  }
}

variable "tags" {
  description = "Tags merged into every resource of the module: with its own two and the provider's default_tags, at most 10 (S3's limit for an object)."
  type        = map(string)
  default     = {}
  nullable    = false

  validation {
    # The function zips are S3 objects, which take at most 10 tags (main.tf, local.s3_object_tag_limit):
    # the module's own and each object's Name count too. The provider's default_tags are
    # counted on the objects themselves (storage.tf), where they are known.
    condition = length(merge(var.tags, local.module_tags, { Name = "" })) <= local.s3_object_tag_limit
    error_message = format(
      "tags: at most %d entries besides the module's own (%s), since S3 allows %d tags on an object and the module tags its function zips; %d given.",
      local.s3_object_tag_limit - length(merge(local.module_tags, { Name = "" })),
      join(", ", keys(merge(local.module_tags, { Name = "" }))),
      local.s3_object_tag_limit,
      length(var.tags),
    )
  }
}

variable "artifacts_dir" {
  description = "Directory holding the function zips built by `python -m idemlab.build`, one `<lesson>.zip` per folder under functions/."
  type        = string

  validation {
    condition     = length(trimspace(var.artifacts_dir)) > 0
    error_message = "artifacts_dir must name the directory that holds the <lesson>.zip files."
  }
}

variable "lambda_runtime" {
  description = "Python runtime of every function."
  type        = string
  default     = "python3.12"

  validation {
    condition     = contains(["python3.11", "python3.12", "python3.13"], var.lambda_runtime)
    error_message = "lambda_runtime must be python3.11, python3.12 or python3.13."
  }
}

variable "lambda_memory_mb" {
  description = "Memory of every function, in MB."
  type        = number
  default     = 256

  validation {
    condition     = var.lambda_memory_mb >= 128 && var.lambda_memory_mb <= 10240
    error_message = "lambda_memory_mb must be between 128 and 10240."
  }
}

variable "async_maximum_retry_attempts" {
  description = "Retries Lambda makes for a failed asynchronous invocation before it goes to the on-failure destination."
  type        = number
  default     = 2

  validation {
    condition     = var.async_maximum_retry_attempts >= 0 && var.async_maximum_retry_attempts <= 2
    error_message = "async_maximum_retry_attempts must be 0, 1 or 2 (the Lambda limits)."
  }
}

variable "async_maximum_event_age_seconds" {
  description = "How long Lambda keeps retrying an asynchronous event before it goes to the on-failure destination."
  type        = number
  default     = 3600

  validation {
    condition     = var.async_maximum_event_age_seconds >= 60 && var.async_maximum_event_age_seconds <= 21600
    error_message = "async_maximum_event_age_seconds must be between 60 and 21600 (the Lambda limits)."
  }
}

variable "log_retention_days" {
  description = "Retention of the function and workflow log groups."
  type        = number
  default     = 14

  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "log_retention_days must be one of the values CloudWatch Logs accepts (1, 3, 5, 7, 14, 30, 60, 90, ...)."
  }
}

variable "deletion_delay_seconds" {
  description = "Delay between an account deletion request and the deletion; 30 days in production, seconds in the workshop."
  type        = number
  default     = 2592000

  validation {
    condition     = var.deletion_delay_seconds >= 0 && floor(var.deletion_delay_seconds) == var.deletion_delay_seconds
    error_message = "deletion_delay_seconds must be a whole number of seconds, 0 or more."
  }
}

variable "deletion_lease_seconds" {
  description = "How long a claim on a deletion request lasts before the sweeper may hand it to another worker."
  type        = number
  default     = 300

  validation {
    condition     = var.deletion_lease_seconds >= 1 && var.deletion_lease_seconds <= 86400
    error_message = "deletion_lease_seconds must be between 1 and 86400."
  }
}

variable "deletion_max_attempts" {
  description = "Claims of one deletion request before it is marked FAILED and sent to the dead-letter queue."
  type        = number
  default     = 3

  validation {
    condition     = var.deletion_max_attempts >= 1 && var.deletion_max_attempts <= 20
    error_message = "deletion_max_attempts must be between 1 and 20."
  }
}

variable "sweeper_schedule_expression" {
  description = "EventBridge schedule of the sweeper that restarts deletions whose lease expired."
  type        = string
  default     = "rate(5 minutes)"

  validation {
    condition     = can(regex("^(rate|cron)\\(.+\\)$", var.sweeper_schedule_expression))
    error_message = "sweeper_schedule_expression must be a rate(...) or cron(...) expression."
  }
}

variable "stuck_metric_namespace" {
  description = "CloudWatch namespace of the metric the sweeper publishes (requests stuck in PROCESSING past their lease)."
  type        = string
  default     = "IdempotencyLab"

  validation {
    condition     = can(regex("^[A-Za-z0-9._/#:-]{1,255}$", var.stuck_metric_namespace)) && !startswith(var.stuck_metric_namespace, "AWS/")
    error_message = "stuck_metric_namespace must be a custom CloudWatch namespace (not AWS/...)."
  }
}

# The alarms: one per dead-letter queue, stuck deletions, a stopped sweeper. Without actions
# they change state in the console and notify no one.
variable "alarm_actions" {
  description = "ARNs notified when any of the module's alarms fires, for example one SNS topic's ARN; empty (the default) keeps the alarms silent."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for arn in var.alarm_actions : startswith(arn, "arn:")])
    error_message = "alarm_actions must be ARNs."
  }
}

variable "enable_bucket_force_destroy" {
  description = "Let `terraform destroy` delete the buckets (user files, function zips) even when they still hold objects."
  type        = bool
  default     = true
}

# 0 turns PITR off on the personal-data tables, so an erased user cannot come back from a
# restore; 1-35 keeps that many days of restorable history, which the deletion promise must
# then include.
variable "personal_data_recovery_days" {
  description = "Point-in-time recovery period, in days, of the tables holding personal data (user_records, identities): 0 (off) or 1-35."
  type        = number
  default     = 0

  validation {
    condition = var.personal_data_recovery_days == 0 || (
      var.personal_data_recovery_days >= 1 && var.personal_data_recovery_days <= 35 &&
      floor(var.personal_data_recovery_days) == var.personal_data_recovery_days
    )
    error_message = "personal_data_recovery_days must be 0 (PITR off) or a whole number of days from 1 to 35 (DynamoDB's range)."
  }
}

# A lesson's slug is its name everywhere (docs/DESIGN.md, "One name per lesson"). Lesson 07
# (keys) deploys variants of the checkout's functions, so it brings the checkout's resources;
# the capstone (08) runs on a backend of its own and needs nothing here.
variable "lessons" {
  description = "The lessons to provision, by slug (vehicles, checkout, deletion, queues, keys, capstone, durable); all by default."
  type        = set(string)
  default     = ["vehicles", "checkout", "deletion", "queues", "keys", "capstone", "durable"]
  nullable    = false

  validation {
    condition = length(setsubtract(var.lessons, keys(local.lesson_builds_on))) == 0
    error_message = format(
      "lessons are slugs: %s. Wrong: %s.",
      join(", ", keys(local.lesson_builds_on)),
      join("; ", setsubtract(var.lessons, keys(local.lesson_builds_on))),
    )
  }
}

# IAM roles: some accounts' service control policies refuse a CreateRole without a permissions
# boundary, or outside a path of their own.
variable "role_path" {
  description = "Path of every IAM role the module creates (function, workflow and Scheduler roles)."
  type        = string
  default     = "/"
  nullable    = false

  validation {
    # IAM's pattern for a path: / alone, or /<printable ASCII>/, 1-512 characters (IAM API reference, CreateRole).
    condition     = length(var.role_path) <= 512 && can(regex("^/([!-~]+/)?$", var.role_path))
    error_message = "role_path must be / or start and end with / (printable ASCII between), at most 512 characters."
  }
}

variable "role_permissions_boundary" {
  description = "ARN of the managed policy set as the permissions boundary of every IAM role the module creates; null, the default: none."
  type        = string
  default     = null

  validation {
    condition     = var.role_permissions_boundary == null || can(regex("^arn:[a-z-]+:iam::([0-9]{12}|aws):policy/.+$", var.role_permissions_boundary))
    error_message = "role_permissions_boundary must be the ARN of a managed IAM policy (arn:<partition>:iam::<account or aws>:policy/<name>)."
  }
}

variable "tables" {
  description = "The lab's DynamoDB tables, keyed by the name functions use (`<KEY>_TABLE`); attributes are strings unless `types` says N or B."
  type = map(object({
    hash_key  = string
    range_key = optional(string)
    ttl       = optional(string)
    types     = optional(map(string), {})
    gsis = optional(list(object({
      name      = string
      hash_key  = string
      range_key = optional(string)
    })), [])
    # A table the deletion workflow erases a user from: its PITR follows var.personal_data_recovery_days.
    personal_data = optional(bool, false)
    # The lessons that use it (var.lessons): it exists when any of them is provisioned; null: always.
    lessons = optional(list(string))
  }))
  nullable = false
  default = {
    vehicles_naive  = { hash_key = "registration_id", lessons = ["vehicles"] }
    vehicles        = { hash_key = "request_id", lessons = ["vehicles"] }
    vehicles_native = { hash_key = "request_id", lessons = ["vehicles"] } # written by the workflow's own PutItem task
    # Fault injection, for every lesson whose functions have fault points.
    faults                 = { hash_key = "fault_key", lessons = ["vehicles", "checkout", "deletion", "durable"] }
    ledger                 = { hash_key = "charge_id", lessons = ["checkout"] }
    processor_keys         = { hash_key = "idempotency_key", lessons = ["checkout"] }
    handrolled_idempotency = { hash_key = "idempotency_key", lessons = ["checkout"] }
    powertools_idempotency = { hash_key = "id", ttl = "expiration", lessons = ["checkout"] }
    deletion_requests = {
      lessons  = ["deletion"]
      hash_key = "deletion_request_id"
      types    = { lease_expires_at = "N" }
      gsis = [
        { name = "by_user", hash_key = "user_id" },
        # The sweeper's Query: status = PROCESSING and lease_expires_at < now, no Scan.
        { name = "by_status_lease", hash_key = "status", range_key = "lease_expires_at" },
      ]
    }
    # Also lesson 09's: its durable functions erase a user from the same tables.
    user_records = { hash_key = "user_id", range_key = "record_id", personal_data = true, lessons = ["deletion", "durable"] }
    identities   = { hash_key = "user_id", personal_data = true, lessons = ["deletion", "durable"] }
    email_outbox = { hash_key = "idempotency_key", lessons = ["deletion", "durable"] }

    # queues (lesson 06).
    stock             = { hash_key = "sku", lessons = ["queues"] }            # units `available` per SKU
    reservations      = { hash_key = "reservation_id", lessons = ["queues"] } # one row per reservation made
    order_idempotency = { hash_key = "id", ttl = "expiration", lessons = ["queues"] }
  }

  validation {
    condition     = alltrue([for key in keys(var.tables) : can(regex("^[a-z][a-z0-9_]*$", key))])
    error_message = "Table keys must be lower_snake_case (they become `<prefix>-<key>` names and `<KEY>_TABLE` variables)."
  }

  validation {
    condition     = alltrue(flatten([for t in values(var.tables) : [for type in values(t.types) : contains(["S", "N", "B"], type)]]))
    error_message = "A table's `types` maps an attribute to S, N or B."
  }

  validation {
    # DynamoDB refuses an attribute definition no key schema uses.
    condition = alltrue(flatten([for t in values(var.tables) : [
      for attribute in keys(t.types) : contains(concat([t.hash_key, t.range_key], flatten([for g in t.gsis : [g.hash_key, g.range_key]])), attribute)
    ]]))
    error_message = "A table's `types` may only name its hash, range or index key attributes."
  }
}

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

# Keys ending in `_dlq` are dead-letter queues: kept 14 days, watched by an alarm. A work queue
# sends a message to its dead-letter queue after `redrive.max_receive_count` receives.
variable "queues" {
  description = "The lab's SQS queues, keyed by the name functions use (`<KEY>_QUEUE_URL`); keys ending in `_dlq` are dead-letter queues."
  type = map(object({
    redrive = optional(object({
      dlq               = string
      max_receive_count = number
    }))
    # null: 14 days for a dead-letter queue, 4 days (SQS's default) for a work queue.
    retention_seconds  = optional(number)
    visibility_seconds = optional(number, 60)
    fifo               = optional(bool, false)
    # The lessons that use it (var.lessons): it exists when any of them is provisioned; null: always.
    lessons = optional(list(string))
  }))
  nullable = false
  default = {
    vehicle_registration_dlq = { lessons = ["vehicles"] } # failed async invocations of the vehicles functions
    checkout_dlq             = { lessons = ["checkout"] } # ... of the checkout functions
    deletion_dlq             = { lessons = ["deletion"] } # ... of the deletion functions, and requests past their last attempt
    scheduler_dlq            = { lessons = ["deletion"] } # deletion schedules Scheduler could not start
    sweeper_rule_dlq         = { lessons = ["deletion"] } # sweeper runs EventBridge could not deliver
    order_fulfilment_dlq     = { lessons = ["queues"] }   # ... of the queues functions

    # queues (lesson 06): one order queue per consumer (var.event_sources maps each to its function).
    # Visibility: six times the consumers' 2 s timeout; compressed time for the workshop.
    # Two receives, then the DLQ (notebook 06 reads the count back from the queue).
    orders_naive             = { redrive = { dlq = "orders_naive_dlq", max_receive_count = 2 }, visibility_seconds = 12, lessons = ["queues"] }
    orders_naive_dlq         = { lessons = ["queues"] }
    orders                   = { redrive = { dlq = "orders_dlq", max_receive_count = 2 }, visibility_seconds = 12, lessons = ["queues"] }
    orders_dlq               = { lessons = ["queues"] }
    orders_by_message_id     = { redrive = { dlq = "orders_by_message_id_dlq", max_receive_count = 2 }, visibility_seconds = 12, lessons = ["queues"] }
    orders_by_message_id_dlq = { lessons = ["queues"] }
    # FIFO with content-based deduplication; its DLQ must be FIFO too.
    orders_fifo     = { redrive = { dlq = "orders_fifo_dlq", max_receive_count = 2 }, visibility_seconds = 12, fifo = true, lessons = ["queues"] }
    orders_fifo_dlq = { fifo = true, lessons = ["queues"] }
  }

  validation {
    condition     = alltrue([for key in keys(var.queues) : can(regex("^[a-z][a-z0-9_]*$", key))])
    error_message = "Queue keys must be lower_snake_case (they become `<prefix>-<key>` names and `<KEY>_QUEUE_URL` variables)."
  }

  # Names the wrong entries: the list is written twice, as the same expression (functions.tf says why).
  validation {
    condition = length([
      for key, q in var.queues : "${key} -> ${q.redrive.dlq}"
      if q.redrive == null ? false : (
        endswith(key, "_dlq") || !contains([for k, d in var.queues : k if endswith(k, "_dlq") && d.fifo == q.fifo], q.redrive.dlq)
      )
    ]) == 0
    error_message = format(
      "A work queue redrives to a `_dlq` key of var.queues, FIFO exactly when it is (SQS requires it); a dead-letter queue has no redrive. Wrong: %s.",
      join("; ", [
        for key, q in var.queues : "${key} -> ${q.redrive.dlq}"
        if q.redrive == null ? false : (
          endswith(key, "_dlq") || !contains([for k, d in var.queues : k if endswith(k, "_dlq") && d.fifo == q.fifo], q.redrive.dlq)
        )
      ]),
    )
  }

  validation {
    condition     = contains(keys(var.queues), "scheduler_dlq") && contains(keys(var.queues), "sweeper_rule_dlq")
    error_message = "var.queues must keep `scheduler_dlq` and `sweeper_rule_dlq`: the module's Scheduler role and sweeper rule send to them."
  }

  validation {
    # SQS limits: maxReceiveCount 1-1000, retention 60 s to 14 days, visibility 0-12 h.
    condition = alltrue([for q in values(var.queues) :
      (q.redrive == null ? true : q.redrive.max_receive_count >= 1 && q.redrive.max_receive_count <= 1000) &&
      (q.retention_seconds == null ? true : q.retention_seconds >= 60 && q.retention_seconds <= 1209600) &&
      q.visibility_seconds >= 0 && q.visibility_seconds <= 43200
    ])
    error_message = "Queue settings outside SQS's limits: redrive.max_receive_count 1-1000, retention_seconds 60-1209600, visibility_seconds 0-43200."
  }
}

# `definition` is a template under workflows/; it receives `<function key>_arn` for every function
# in `invokes`, `<table key>_table` for every table in `tables` (for direct DynamoDB
# integrations), `<alias>_arn` for every entry of `aliases` (template name -> function key),
# and `partition` (aws, aws-cn, aws-us-gov) for the ARNs of service integrations.
variable "workflows" {
  description = "The lab's Step Functions state machines; each `definition` is a template under workflows/ given its functions' ARNs and tables' names."
  type = map(object({
    type       = string
    definition = string
    invokes    = list(string)
    tables     = optional(map(string), {}) # { <key of var.tables> = <level of local.table_actions> }
    aliases    = optional(map(string), {})
    lesson     = optional(string) # provisioned with this lesson (var.lessons); null: always
  }))
  nullable = false
  default = {
    vehicle_registration_naive = {
      lesson     = "vehicles"
      type       = "EXPRESS"
      definition = "vehicle_registration.asl.json"
      invokes    = ["rmv_check", "write_vehicle_naive", "notify"]
      aliases    = { write_vehicle = "write_vehicle_naive" }
    }
    vehicle_registration_idempotent = {
      lesson     = "vehicles"
      type       = "EXPRESS"
      definition = "vehicle_registration.asl.json"
      invokes    = ["rmv_check", "write_vehicle_idempotent", "notify"]
      aliases    = { write_vehicle = "write_vehicle_idempotent" }
    }
    # The same workflow with the write done by Step Functions itself: a DynamoDB PutItem
    # task with a condition (no Lambda), then a GetItem when the condition refuses it.
    vehicle_registration_native = {
      lesson     = "vehicles"
      type       = "EXPRESS"
      definition = "vehicle_registration_native.asl.json"
      invokes    = ["rmv_check", "notify"]
      tables     = { vehicles_native = "get_put" }
    }
    account_deletion = {
      # Standard: exactly-once execution, and a duplicate StartExecution with the same name is recognised.
      lesson     = "deletion"
      type       = "STANDARD"
      definition = "account_deletion.asl.json"
      invokes    = ["claim_deletion", "delete_records", "delete_files", "delete_identity", "send_goodbye", "complete_deletion"]
    }
  }

  validation {
    condition     = alltrue([for key in keys(var.workflows) : can(regex("^[a-z][a-z0-9_]*$", key))])
    error_message = "Workflow keys must be lower_snake_case (they become `<prefix>-<key>` names and `<KEY>_STATE_MACHINE_ARN` variables)."
  }

  validation {
    condition     = contains(keys(var.workflows), "account_deletion")
    error_message = "var.workflows must keep `account_deletion`: the module's Scheduler role starts it."
  }

  validation {
    condition     = alltrue([for w in values(var.workflows) : contains(["STANDARD", "EXPRESS"], w.type)])
    error_message = "A workflow's type is STANDARD or EXPRESS."
  }

  # The rules below name the wrong entries: each list is written twice, as the same expression
  # (functions.tf says why).
  validation {
    condition = length(flatten([for key, w in var.workflows : [
      for fn in concat(w.invokes, values(w.aliases)) : "${key} invokes ${fn}" if !contains(keys(var.functions), fn)
    ]])) == 0
    error_message = format(
      "Every function a workflow invokes or aliases is a key of var.functions. Wrong: %s.",
      join("; ", flatten([for key, w in var.workflows : [
        for fn in concat(w.invokes, values(w.aliases)) : "${key} invokes ${fn}" if !contains(keys(var.functions), fn)
      ]])),
    )
  }

  validation {
    condition = length(flatten([for key, w in var.workflows : [
      for t, level in w.tables : "${key}: ${t} = \"${level}\"" if !contains(keys(var.tables), t) || !contains(keys(local.table_actions), level)
    ]])) == 0
    error_message = format(
      "Every table a workflow lists is a key of var.tables, with an access level of local.table_actions (%s). Wrong: %s.",
      join(", ", keys(local.table_actions)),
      join("; ", flatten([for key, w in var.workflows : [
        for t, level in w.tables : "${key}: ${t} = \"${level}\"" if !contains(keys(var.tables), t) || !contains(keys(local.table_actions), level)
      ]])),
    )
  }

  validation {
    condition = length(flatten([for key, f in var.functions : [
      for w in concat(f.starts, f.knows) : "${key} names ${w}" if !contains(keys(var.workflows), w)
    ]])) == 0
    error_message = format(
      "Every workflow a function starts or knows (var.functions) is a key of var.workflows. Wrong: %s.",
      join("; ", flatten([for key, f in var.functions : [
        for w in concat(f.starts, f.knows) : "${key} names ${w}" if !contains(keys(var.workflows), w)
      ]])),
    )
  }

  validation {
    condition = length([
      for key, w in var.workflows : "${key}: workflows/${w.definition}" if !fileexists("${path.module}/workflows/${w.definition}")
    ]) == 0
    error_message = format(
      "Every workflow definition is a file under workflows/. Wrong: %s.",
      join("; ", [
        for key, w in var.workflows : "${key}: workflows/${w.definition}" if !fileexists("${path.module}/workflows/${w.definition}")
      ]),
    )
  }

  # Tables, functions and queues share one map of names (main.tf, local.name), so a key used in
  # two of them would stop the plan with Terraform's bare "Duplicate object key". Workflows are
  # named apart, but one key naming one thing keeps every output and environment variable plain.
  # A rule may read only variables whose own rules never read it back (Terraform refuses the
  # cycle): no rule reads var.workflows, so the rule that spans the maps lives here.
  validation {
    condition = length([
      for key in distinct(concat(keys(var.tables), keys(var.functions), keys(var.queues), keys(var.workflows))) :
      format("%s (%s)", key, join(" and ", [
        for kind, names in { tables = keys(var.tables), functions = keys(var.functions), queues = keys(var.queues), workflows = keys(var.workflows) } :
        kind if contains(names, key)
      ]))
      if length([for names in [keys(var.tables), keys(var.functions), keys(var.queues), keys(var.workflows)] : names if contains(names, key)]) > 1
    ]) == 0
    error_message = format(
      "A key names one table, function, queue or workflow (each is named <prefix>-<key>): rename one of them. Wrong: %s.",
      join("; ", [
        for key in distinct(concat(keys(var.tables), keys(var.functions), keys(var.queues), keys(var.workflows))) :
        format("%s (%s)", key, join(" and ", [
          for kind, names in { tables = keys(var.tables), functions = keys(var.functions), queues = keys(var.queues), workflows = keys(var.workflows) } :
          kind if contains(names, key)
        ]))
        if length([for names in [keys(var.tables), keys(var.functions), keys(var.queues), keys(var.workflows)] : names if contains(names, key)]) > 1
      ]),
    )
  }
}

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
    # Provisioned with this lesson (var.lessons); null: always.
    lesson = optional(string)
  }))
  nullable = false
  default = {
    orders_naive = { lesson = "queues", function = "fulfil_naive", queue = "orders_naive", batching_window_seconds = 1 }
    orders = {
      lesson = "queues", function = "fulfil_idempotent", queue = "orders", report_batch_item_failures = true, batching_window_seconds = 1
    }
    orders_by_message_id = {
      lesson = "queues", function = "fulfil_by_message_id", queue = "orders_by_message_id", report_batch_item_failures = true, batching_window_seconds = 1
    }
    # The naive consumer behind a FIFO queue: deduplicated sends, redelivered failures.
    orders_fifo = { lesson = "queues", function = "fulfil_naive", queue = "orders_fifo" }
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
