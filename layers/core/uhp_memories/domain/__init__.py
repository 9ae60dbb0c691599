"""The pure domain core: entities, rules and services. No AWS, no HTTP."""
