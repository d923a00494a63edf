"""Tests of the take-home pytest plugin (idemlab/testing/)."""
