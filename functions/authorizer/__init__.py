"""The authorizer function."""
