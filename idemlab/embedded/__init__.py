"""The embedded backend: moto's server, extended where the lessons need AWS behaviour.

`server.serve` installs six patches on moto, each in its own module here (docs/DESIGN.md,
"The embedded backend", lists what they change):

- `dynamodb_atomic`: one lock around every DynamoDB request, because moto's conditional
  writes race (two `attribute_not_exists` puts can both succeed).
- `lambda_api` (with `lambda_runtime`, `lambda_worker`, `lambda_async`,
  `lambda_concurrency`): Invoke runs the handler, which moto cannot do without Docker;
  asynchronous invokes retry and reach the function's dead-letter queue or destination,
  and a concurrency limit answers 429 as Lambda does.
- `stepfunctions_ext`: state machines execute; StartSyncExecution,
  ValidateStateMachineDefinition and ListStateMachineVersions exist; an unnamed start gets
  a fresh name; Express executions cannot be read back, as on AWS.
- `scheduler_ext`: EventBridge Scheduler refuses a malformed schedule expression (400) and
  a duplicate name (409), as AWS does.
- `sqs_event_source`: SQS event source mappings poll in batches as Lambda does (batching
  window, visibility timeout, `batchItemFailures`, FIFO deduplication for five minutes).
- `terraform_compat`: a compact RedrivePolicy and the `aws:SecureTransport` condition, so
  a second Terraform plan is empty and the TLS-only bucket policy lets loopback requests in.

Beside the patches: `rule_scheduler` fires EventBridge `rate(...)` rules, which moto only
stores, and `loopback_guard` keeps a server that runs uploaded code to this machine.
"""
