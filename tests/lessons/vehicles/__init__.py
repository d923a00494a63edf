"""Lesson tests: vehicles."""
