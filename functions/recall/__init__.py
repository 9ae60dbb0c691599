"""The recall function."""
