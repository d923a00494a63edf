"""Lesson tests: durable."""
