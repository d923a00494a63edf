"""Lesson tests: queues."""
