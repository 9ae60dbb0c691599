"""Adapters: the ports implemented on DynamoDB, in memory (unit tests), and the system clock."""
