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
