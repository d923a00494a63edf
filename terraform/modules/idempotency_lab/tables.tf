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
  }))
  nullable = false
  default = {
    vehicles_naive         = { hash_key = "registration_id" }
    vehicles               = { hash_key = "request_id" }
    vehicles_native        = { hash_key = "request_id" } # written by the workflow's own PutItem task
    faults                 = { hash_key = "fault_key" }
    ledger                 = { hash_key = "charge_id" }
    processor_keys         = { hash_key = "idempotency_key" }
    handrolled_idempotency = { hash_key = "idempotency_key" }
    powertools_idempotency = { hash_key = "id", ttl = "expiration" }
    deletion_requests = {
      hash_key = "deletion_request_id"
      types    = { lease_expires_at = "N" }
      gsis = [
        { name = "by_user", hash_key = "user_id" },
        # The sweeper's Query: status = PROCESSING and lease_expires_at < now, no Scan.
        { name = "by_status_lease", hash_key = "status", range_key = "lease_expires_at" },
      ]
    }
    user_records = { hash_key = "user_id", range_key = "record_id", personal_data = true }
    identities   = { hash_key = "user_id", personal_data = true }
    email_outbox = { hash_key = "idempotency_key" }

    # queues (lesson 06).
    stock             = { hash_key = "sku" }            # units `available` per SKU
    reservations      = { hash_key = "reservation_id" } # one row per reservation made
    order_idempotency = { hash_key = "id", ttl = "expiration" }
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

locals {
  table_specs = { for key, t in var.tables : key => merge(t, {
    # Backups are part of deletion: with PITR on, an item deleted from the table can be
    # restored for the whole recovery period (1-35 days, default 35; DynamoDB developer guide,
    # https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/PointInTimeRecovery_Howitworks.html).
    # A personal-data table therefore keeps PITR only when the operator chose a period and
    # counts it in the deletion promise.
    pitr_enabled = !t.personal_data || var.personal_data_recovery_days > 0
    pitr_days    = t.personal_data && var.personal_data_recovery_days > 0 ? var.personal_data_recovery_days : null
  }) }

  table_attributes = { for key, t in var.tables : key => distinct(compact(concat(
    [t.hash_key, t.range_key],
    flatten([for g in t.gsis : [g.hash_key, g.range_key]]),
  ))) }
}

resource "aws_dynamodb_table" "this" {
  for_each = local.table_specs

  name         = local.name[each.key]
  billing_mode = "PAY_PER_REQUEST"
  hash_key     = each.value.hash_key
  range_key    = each.value.range_key

  dynamic "attribute" {
    for_each = local.table_attributes[each.key]
    content {
      name = attribute.value
      type = lookup(each.value.types, attribute.value, "S")
    }
  }

  dynamic "global_secondary_index" {
    for_each = each.value.gsis
    content {
      name            = global_secondary_index.value.name
      hash_key        = global_secondary_index.value.hash_key
      range_key       = global_secondary_index.value.range_key
      projection_type = "ALL"
    }
  }

  dynamic "ttl" {
    for_each = each.value.ttl == null ? [] : [each.value.ttl]
    content {
      attribute_name = ttl.value
      enabled        = true
    }
  }

  #checkov:skip=CKV_AWS_119:AWS-managed KMS key; a customer-managed key costs a monthly fee per key and buys nothing for workshop data
  server_side_encryption {
    enabled = true
  }

  #checkov:skip=CKV_AWS_28:PITR is off only on the personal-data tables, by default: a restore would bring back erased users (local.table_specs)
  point_in_time_recovery {
    enabled                 = each.value.pitr_enabled
    recovery_period_in_days = each.value.pitr_days
  }

  tags = merge(local.tags, { Name = local.name[each.key] })
}
