"""Counting tokens for prime's budget (§9.1): the MiniLM tokenizer, in pure Python (tokens/wordpiece.py)."""

from uhp_memories.tokens.wordpiece import MiniLmTokens, count_tokens

__all__ = ["MiniLmTokens", "count_tokens"]
