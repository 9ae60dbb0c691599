"""The records function."""
