"""The operations function."""
