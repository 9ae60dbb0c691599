"""The grants function."""
