"""Lesson tests: checkout."""
