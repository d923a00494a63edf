"""Lesson tests: capstone."""
