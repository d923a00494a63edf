output "lab" {
  description = "Every name and ARN the module created, keyed as in docs/DESIGN.md (tables, functions, state_machines, queues, buckets, alarms, ...)."
  value       = module.idempotency_lab.lab
}

output "stuck_metric" {
  description = "The custom metric the sweeper publishes and the stuck-deletion alarm watches."
  value       = module.idempotency_lab.stuck_metric
}

output "table_names" {
  description = "The DynamoDB tables created, by key."
  value       = module.idempotency_lab.table_names
}

output "function_names" {
  description = "The Lambda functions created, by key."
  value       = module.idempotency_lab.function_names
}

output "state_machine_arns" {
  description = "The Step Functions state machines created, by key."
  value       = module.idempotency_lab.state_machine_arns
}

output "queue_urls" {
  description = "The SQS queues created, by key."
  value       = module.idempotency_lab.queue_urls
}
