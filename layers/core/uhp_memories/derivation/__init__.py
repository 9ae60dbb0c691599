"""Derivers (the `Deriver` port of uhp_memories.domain.derivation): the prompts and the answer's schema
(`prompts`), Amazon Bedrock's Converse API (`bedrock`), and any OpenAI-compatible chat endpoint
(`openai_compat`). Each adapter module is imported on its own, so a deployment loads only the one it uses.
"""
