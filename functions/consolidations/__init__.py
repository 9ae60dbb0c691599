"""The consolidations function."""
