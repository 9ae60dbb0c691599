"""The snapshots function."""
