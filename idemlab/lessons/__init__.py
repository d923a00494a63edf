"""Plumbing the lesson notebooks import, so that a notebook shows the lesson, not the setup."""
