"""Tests of the embedded backend (idemlab/embedded/)."""
