"""Adapters of providers other than the native one (domain/providers.py `RecordProvider`), each imported
only by a composition that connects it (bootstrap.build_providers), so a stage without one never loads
its library."""
