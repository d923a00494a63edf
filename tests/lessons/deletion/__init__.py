"""Lesson tests: deletion."""
