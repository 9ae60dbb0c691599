"""The jobs function."""
