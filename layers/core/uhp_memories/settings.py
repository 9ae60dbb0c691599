"""Settings, parsed once from the environment into a model. Nothing else reads os.environ."""

from __future__ import annotations

import os

from pydantic import BaseModel, Field


class Settings(BaseModel):
    table_name: str = Field(default="uhp-memories", description="the main table")
    keys_table_name: str = Field(default="uhp-memories-keys")
    idempotency_table_name: str = Field(default="uhp-memories-idempotency")
    region: str = Field(default="us-east-1")
    idempotency_seconds: int = Field(default=24 * 3600, ge=60)
    files_bucket: str = Field(default="uhp-memories-files")
    # Where presigned S3 addresses point; None means the regional S3 endpoint (AWS).
    s3_public_endpoint: str | None = None

    @classmethod
    def from_env(cls) -> Settings:
        env = os.environ
        return cls(
            table_name=env.get("UHP_TABLE_NAME", "uhp-memories"),
            keys_table_name=env.get("UHP_KEYS_TABLE_NAME", "uhp-memories-keys"),
            idempotency_table_name=env.get("UHP_IDEMPOTENCY_TABLE_NAME", "uhp-memories-idempotency"),
            region=env.get("AWS_REGION", env.get("AWS_DEFAULT_REGION", "us-east-1")),
            idempotency_seconds=int(env.get("UHP_IDEMPOTENCY_SECONDS", str(24 * 3600))),
            files_bucket=env.get("UHP_FILES_BUCKET", "uhp-memories-files"),
        )
