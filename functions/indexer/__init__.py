"""The search indexer: a worker that keeps the recall index in step with the main table's stream."""
