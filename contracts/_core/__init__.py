"""Machinery behind the contract objects: specs, the rule registry, validation, modes."""
