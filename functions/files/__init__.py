"""The files function."""
