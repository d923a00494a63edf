locals {
  # Both buckets: private, encrypted, TLS only. `user_files` holds what the deletion lesson
  # removes; `artifacts` holds the function zips.
  buckets = {
    user_files = "${var.prefix}-user-files-${local.account_id}-${local.region}"
    artifacts  = "${var.prefix}-artifacts-${local.account_id}-${local.region}"
  }

  # One zip per lesson folder the chosen functions come from.
  lessons = toset([for f in values(local.function_specs) : f.lesson])
}

resource "aws_s3_bucket" "this" {
  for_each = local.buckets

  # Bucket names are global: account and region make the lab's names unique.
  bucket        = each.value
  force_destroy = var.enable_bucket_force_destroy

  #checkov:skip=CKV_AWS_21:no versioning on purpose: the deletion lesson must really remove a user's files, and artifacts are rebuilt from source
  #checkov:skip=CKV_AWS_18:access logging needs a further bucket; these hold generated workshop files and zips only
  #checkov:skip=CKV_AWS_144:cross-region replication would copy user files the deletion must remove
  #checkov:skip=CKV2_AWS_62:nothing consumes object events in this lab
  #checkov:skip=CKV_AWS_145:SSE-S3 (AES256) encryption; a customer-managed KMS key adds a monthly fee and buys nothing for workshop data
  #checkov:skip=CKV2_AWS_61:no lifecycle rules: the lesson or the stack's destroy deletes objects; the lifecycle resource adds a minute to every apply
  tags = merge(local.tags, { Name = each.value })
}

resource "aws_s3_bucket_public_access_block" "this" {
  for_each = local.buckets

  bucket                  = aws_s3_bucket.this[each.key].id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_server_side_encryption_configuration" "this" {
  for_each = local.buckets

  bucket = aws_s3_bucket.this[each.key].id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "AES256"
    }
  }
}

resource "aws_s3_bucket_policy" "this" {
  for_each = local.buckets

  bucket = aws_s3_bucket.this[each.key].id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid       = "DenyPlainHttp"
      Effect    = "Deny"
      Principal = "*"
      Action    = "s3:*"
      Resource  = [aws_s3_bucket.this[each.key].arn, "${aws_s3_bucket.this[each.key].arn}/*"]
      Condition = { Bool = { "aws:SecureTransport" = "false" } }
    }]
  })
  # S3 rejects a policy while the public access block is being applied.
  depends_on = [aws_s3_bucket_public_access_block.this]
}

# Function code goes through S3: with `filename`, the AWS provider creates functions one at
# a time (a global lock held through its 5 s wait for each), 18 functions took 95 s.
resource "aws_s3_object" "code" {
  for_each = local.lessons

  bucket      = aws_s3_bucket.this["artifacts"].id
  key         = "functions/${each.key}.zip"
  source      = "${var.artifacts_dir}/${each.key}.zip"
  source_hash = filemd5("${var.artifacts_dir}/${each.key}.zip")
  tags        = merge(local.tags, { Name = "${each.key}.zip" })

  lifecycle {
    # The provider adds its default_tags to the object's own: S3 refuses more than 10 in all.
    precondition {
      condition = length(merge(data.aws_default_tags.current.tags, local.tags, { Name = "" })) <= local.s3_object_tag_limit
      error_message = format(
        "The function zips would carry %d tags (the provider's default_tags, var.tags and the module's own), more than S3's %d: drop some.",
        length(merge(data.aws_default_tags.current.tags, local.tags, { Name = "" })),
        local.s3_object_tag_limit,
      )
    }
  }

  depends_on = [aws_s3_bucket_server_side_encryption_configuration.this]
}
