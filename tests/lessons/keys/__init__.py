"""Lesson tests: keys."""
