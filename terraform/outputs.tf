output "lab" {
  description = "Every name and ARN of the lab (see docs/DESIGN.md); read by idemlab.stack.outputs()."
  value       = module.lab.lab
}
