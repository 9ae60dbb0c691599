"""The harnesses function."""
