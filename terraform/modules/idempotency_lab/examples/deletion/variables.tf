variable "artifacts_dir" {
  # From the repository root: python -m idemlab.build --out <dir> (without --out: build/,
  # which is ../../../../../build from here). ../README.md says more.
  description = "Directory of the function zips, one <lesson>.zip per folder under functions/ (python -m idemlab.build --out <dir>)."
  type        = string
}

variable "prefix" {
  description = "Prefix of every name the stack creates."
  type        = string
  default     = "ex-deletion"
}

variable "region" {
  description = "AWS region of the stack."
  type        = string
  default     = "eu-west-1"
}
