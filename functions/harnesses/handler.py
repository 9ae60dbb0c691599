"""The harnesses function: attaching memories to harnesses is not implemented yet, so every route answers memory_unsupported."""

from uhp_memories.api.app import make_handler
from uhp_memories.api.unsupported import unsupported_resolver

app = unsupported_resolver("harnesses", "attaching memories to harnesses")
lambda_handler = make_handler(app)
