"""The memories function."""
