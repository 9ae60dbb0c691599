"""uhp-memories: a server for the Harness Memories sub-protocol."""

__version__ = "0.2.0"
