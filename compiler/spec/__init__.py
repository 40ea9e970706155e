"""Spec roots compiled into a Bundle: YAML documents with locations, JSON Schema
validation, the deterministic Jinja environment, bundle values, the build and the lock file."""
