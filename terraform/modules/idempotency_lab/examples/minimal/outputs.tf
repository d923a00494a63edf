output "lab" {
  description = "Every name and ARN the module created, keyed as in docs/DESIGN.md (tables, functions, state_machines, queues, buckets, alarms, ...)."
  value       = module.idempotency_lab.lab
}

output "stuck_metric" {
  description = "The custom metric the sweeper publishes and the stuck-deletion alarm watches."
  value       = module.idempotency_lab.stuck_metric
}
