"""Workflow steps: one idempotent Lambda handler per state machine task."""
