"""The operations function: type operations is not implemented yet, so every route answers memory_unsupported."""

from uhp_memories.api.app import make_handler
from uhp_memories.api.unsupported import unsupported_resolver

app = unsupported_resolver("operations", "type operations")
lambda_handler = make_handler(app)
