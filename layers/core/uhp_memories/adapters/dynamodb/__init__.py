"""DynamoDB adapters: the source of truth for the tree, grants, record versions, snapshots and keys."""
