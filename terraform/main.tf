module "lab" {
  source = "./modules/idempotency_lab"

  prefix                 = var.prefix
  artifacts_dir          = var.artifacts_dir
  deletion_delay_seconds = var.deletion_delay_seconds
  functions              = var.functions
  queues                 = var.queues
  tags                   = var.tags
  alarm_actions          = var.alarm_actions
  lessons                = var.lessons
  # One namespace per participant: two stacks in one account share no metric, and no alarm
  # of one watches a metric the other publishes.
  stuck_metric_namespace = "IdempotencyLab/${var.prefix}"
}
