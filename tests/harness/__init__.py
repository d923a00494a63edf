"""Tests of the harness (idemlab/ outside the embedded backend, the plugin and the lessons), and of the tree."""
