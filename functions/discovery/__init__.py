"""The discovery function."""
