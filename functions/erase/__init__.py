"""The erase function."""
