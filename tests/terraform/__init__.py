"""Tests of the Terraform: the module, its validations, its zips and what is read from it."""
