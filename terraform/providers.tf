# No endpoints here: against LocalStack or the embedded backend, `tflocal` writes an
# override file that points every service at AWS_ENDPOINT_URL.
provider "aws" {
  region = var.region

  default_tags {
    tags = {
      project    = "idempotency-lab"
      managed-by = "terraform"
      # Whose stack, on every resource that takes tags, including those the module does not
      # tag itself (event source mappings, for one): what `make workshop-destroy` looks for.
      "idemlab:participant" = var.prefix
    }
  }
}
