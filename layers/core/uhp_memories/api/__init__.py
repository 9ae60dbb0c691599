"""The HTTP edge shared by every function: routes, schemas, errors, auth context, idempotency."""
