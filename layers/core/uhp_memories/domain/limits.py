"""Limits (DESIGN.md). Each is enforced with a clear 422, never by silently cutting."""

NAME_CHARS = 200
DESCRIPTION_CHARS = 2_000
CONTENT_BYTES = 100 * 1024
ATTRIBUTES_JSON_BYTES = 16 * 1024
LIST_DEFAULT = 20
LIST_MAX = 100
RECALL_LIMIT_MAX = 100
MAX_DEPTH = 3
REFERENCES_MAX = 32
TYPE_CHARS = 100
SNAPSHOT_NAME_CHARS = 100
MESSAGE_CHARS = 2_000
MAX_TREE_DEPTH = 50
# A move is one DynamoDB transaction (at most 100 items): the memory, a check of each memory above its
# new parent, and the new ancestors of each memory below it (docs/decisions.md, "The 404 of an unseen
# memory").
MOVE_ITEMS_MAX = 100
# Records an erase may name in one request (each erased with its whole version chain).
ERASE_NAMED_MAX = 100
# What one observe carries in all, its episodes' content (UTF-8 text, or a file reference as compact
# JSON) and attributes (compact JSON) together: observe is one DynamoDB transaction, whose items hold
# at most 4 MiB together, so 50 episodes of 100 KiB (5 MB) cannot be one. 3 MiB leaves 1 MiB for what
# each item adds to what the caller sent (keys, stamps, references: about 5 KiB at most an episode), and
# keeps observe's answer, which shows each episode, under the 6 MB a Lambda function may answer.
OBSERVE_BYTES = 3 * 1024 * 1024
