module "lab" {
  source = "./modules/idempotency_lab"

  prefix                 = var.prefix
  artifacts_dir          = var.artifacts_dir
  deletion_delay_seconds = var.deletion_delay_seconds
  functions              = var.functions
  queues                 = var.queues
  tags                   = var.tags
}
