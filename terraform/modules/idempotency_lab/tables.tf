locals {
  # One entry per table. Keys are strings unless `types` says otherwise ("N", "B").
  # To add a table: add an entry here, then name it in a function's `tables`.
  # `personal_data = true` marks a table the deletion workflow erases a user from: its
  # point-in-time recovery follows var.personal_data_recovery_days (see below).
  tables = {
    vehicles_naive         = { hash_key = "registration_id" }
    vehicles               = { hash_key = "request_id" }
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

    # Lesson 4: queues.
    stock             = { hash_key = "sku" }            # units `available` per SKU
    reservations      = { hash_key = "reservation_id" } # one row per reservation made
    order_idempotency = { hash_key = "id", ttl = "expiration" }
  }

  table_specs = { for key, t in local.tables : key => {
    hash_key  = t.hash_key
    range_key = try(t.range_key, null)
    ttl       = try(t.ttl, null)
    gsis = [for g in try(t.gsis, []) : {
      name      = g.name
      hash_key  = g.hash_key
      range_key = try(g.range_key, null)
    }]
    types = try(t.types, {})
    # Backups are part of deletion: with PITR on, an item deleted from the table can be
    # restored for the whole recovery period (1-35 days, default 35; DynamoDB developer guide,
    # https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/PointInTimeRecovery_Howitworks.html).
    # A personal-data table therefore keeps PITR only when the operator chose a period and
    # counts it in the deletion promise.
    pitr_enabled = !try(t.personal_data, false) || var.personal_data_recovery_days > 0
    pitr_days    = try(t.personal_data, false) && var.personal_data_recovery_days > 0 ? var.personal_data_recovery_days : null
  } }

  table_attributes = { for key, t in local.table_specs : key => distinct(compact(concat(
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

  #checkov:skip=CKV_AWS_28:PITR is off only on the personal-data tables, by default: a restore would bring back users the deletion workflow erased (see local.table_specs)
  point_in_time_recovery {
    enabled                 = each.value.pitr_enabled
    recovery_period_in_days = each.value.pitr_days
  }

  tags = merge(local.tags, { Name = local.name[each.key] })
}
