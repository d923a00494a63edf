locals {
  # The tables of the chosen lessons (var.lessons, main.tf).
  table_specs = { for key, t in var.tables : key => merge(t, {
    # Backups are part of deletion: with PITR on, an item deleted from the table can be
    # restored for the whole recovery period (1-35 days, default 35; DynamoDB developer guide,
    # https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/PointInTimeRecovery_Howitworks.html).
    # A personal-data table therefore keeps PITR only when the operator chose a period and
    # counts it in the deletion promise.
    pitr_enabled = !t.personal_data || var.personal_data_recovery_days > 0
    pitr_days    = t.personal_data && var.personal_data_recovery_days > 0 ? var.personal_data_recovery_days : null
  }) if t.lessons == null || length(setintersection(coalesce(t.lessons, []), local.chosen_lessons)) > 0 }

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
