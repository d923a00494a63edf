locals {
  # What a mistyped key in one of the entry maps would otherwise turn into: an "Invalid
  # index" deep inside iam.tf, naming neither the entry nor the key. Lookups elsewhere fall
  # back to this placeholder, and the preconditions below stop the plan with these messages.
  unknown = "UNKNOWN-see-entry-errors"

  entry_errors = flatten(concat(
    [for key, f in local.function_specs : concat(
      [for t in keys(f.tables) : "function ${key}: table \"${t}\" is not a key of local.tables" if !contains(keys(local.tables), t)],
      [for t, level in f.tables : "function ${key}: access \"${level}\" to ${t} is not one of ${join(", ", keys(local.table_actions))}" if !contains(keys(local.table_actions), level)],
      [for fn in f.invokes : "function ${key}: invokes \"${fn}\", which is not a key of local.functions" if !contains(keys(local.functions), fn)],
      [for q in f.sends : "function ${key}: sends to \"${q}\", which is not a key of local.queues" if !contains(keys(local.queues), q)],
      [for w in f.starts : "function ${key}: starts \"${w}\", which is not a key of local.workflows" if !contains(keys(local.workflows), w)],
      [for g in f.grants : "function ${key}: grant \"${g}\" is not one of ${join(", ", keys(local.extra_grants))}" if !contains(keys(local.extra_grants), g)],
      endswith(f.dlq, "_dlq") && contains(keys(local.queues), f.dlq) ? [] : ["function ${key}: its dead-letter queue \"${f.dlq}\" is not a _dlq key of local.queues (set `dlq`, or add the scenario to local.scenario_dlq)"],
    )],
    [for key, w in local.workflow_specs : concat(
      [for fn in w.invokes : "workflow ${key}: invokes \"${fn}\", which is not a key of local.functions" if !contains(keys(local.functions), fn)],
      [for t, level in w.tables : "workflow ${key}: table \"${t}\" with access \"${level}\" is not a known table and level" if !contains(keys(local.tables), t) || !contains(keys(local.table_actions), level)],
      fileexists("${path.module}/workflows/${w.definition}") ? [] : ["workflow ${key}: no definition file workflows/${w.definition}"],
    )],
    [for key, e in local.event_sources : "event source ${key}: function \"${e.function}\" or queue \"${e.queue}\" is not a key of local.functions / local.queues" if !contains(keys(local.functions), e.function) || !contains(keys(local.queues), e.queue)],
    [for key, q in local.queue_specs : "queue ${key}: redrive_to \"${q.redrive_to}\" is not a _dlq key of local.queues" if q.redrive_to != null && !contains([for k, d in local.queue_specs : k if d.is_dlq], coalesce(q.redrive_to, "-"))],
  ))
}

# Checked before anything is created: a plan with a wrong entry stops here, with the
# entry and the key in the message.
resource "terraform_data" "entries_are_consistent" {
  input = length(local.entry_errors)

  lifecycle {
    precondition {
      condition     = length(local.entry_errors) == 0
      error_message = "Inconsistent entries in the module's locals: ${join("; ", local.entry_errors)}"
    }
  }
}
