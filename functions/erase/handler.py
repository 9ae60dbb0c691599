"""The erase function: erase is not implemented yet, so every route answers memory_unsupported."""

from uhp_memories.api.app import make_handler
from uhp_memories.api.unsupported import unsupported_resolver

app = unsupported_resolver("erase", "erase")
lambda_handler = make_handler(app)
