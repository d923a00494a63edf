resource "aws_s3_bucket" "user_files" {
  # Bucket names are global: account and region make the lab's name unique.
  bucket        = "${var.prefix}-user-files-${local.account_id}-${local.region}"
  force_destroy = var.enable_bucket_force_destroy

  #checkov:skip=CKV_AWS_21:no versioning on purpose: the deletion lesson must really remove a user's files, and old versions would keep them
  #checkov:skip=CKV_AWS_18:access logging needs a second bucket; the workshop bucket holds generated files only
  #checkov:skip=CKV_AWS_144:cross-region replication would copy user files the deletion must remove
  #checkov:skip=CKV2_AWS_62:nothing consumes object events in this lab
  #checkov:skip=CKV_AWS_145:SSE-S3 (AES256) encryption; a customer-managed KMS key adds a monthly fee and buys nothing for workshop data
  tags = merge(local.tags, { Name = "${var.prefix}-user-files" })
}

resource "aws_s3_bucket_public_access_block" "user_files" {
  bucket                  = aws_s3_bucket.user_files.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_server_side_encryption_configuration" "user_files" {
  bucket = aws_s3_bucket.user_files.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "AES256"
    }
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "user_files" {
  bucket = aws_s3_bucket.user_files.id
  rule {
    id     = "abort-incomplete-uploads"
    status = "Enabled"
    filter {}
    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
  }
}

resource "aws_s3_bucket_policy" "user_files" {
  bucket = aws_s3_bucket.user_files.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid       = "DenyPlainHttp"
      Effect    = "Deny"
      Principal = "*"
      Action    = "s3:*"
      Resource  = [aws_s3_bucket.user_files.arn, "${aws_s3_bucket.user_files.arn}/*"]
      Condition = { Bool = { "aws:SecureTransport" = "false" } }
    }]
  })
  # S3 rejects a policy while the public access block is being applied.
  depends_on = [aws_s3_bucket_public_access_block.user_files]
}
