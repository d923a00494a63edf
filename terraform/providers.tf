# No endpoints here: against LocalStack or the embedded backend, `tflocal` writes an
# override file that points every service at AWS_ENDPOINT_URL.
provider "aws" {
  region = var.region

  default_tags {
    tags = {
      project    = "idempotency-lab"
      managed-by = "terraform"
    }
  }
}
