"""Local mode: the same handlers behind a local gateway, over moto in process. Dev and test only:
nothing a deployed handler imports comes from here."""
