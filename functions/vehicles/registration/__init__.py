"""Shared code of the vehicle-registration functions: one request format, one VIN rule."""
