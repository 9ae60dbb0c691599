"""The queries function."""
