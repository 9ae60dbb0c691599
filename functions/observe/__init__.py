"""The observe function."""
