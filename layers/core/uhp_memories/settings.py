"""Settings, parsed once from the environment into a model. Nothing else reads os.environ."""

from __future__ import annotations

import os
from typing import Literal

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
    erase_state_machine_arn: str = ""
    delete_state_machine_arn: str = ""
    consolidate_state_machine_arn: str = ""
    derive_state_machine_arn: str = ""
    # Consolidation schedules (domain/consolidation/schedules.py): EventBridge Scheduler's group for this stage, the
    # function each schedule invokes, and the role Scheduler invokes it with; none: schedules unsupported.
    schedule_group: str = ""
    schedule_target_arn: str = ""
    schedule_role_arn: str = ""
    # How long a request waits for a workflow before answering 202 with a job (API Gateway: 29 s).
    workflow_wait_seconds: float = 20.0
    # Operations (api/observability.py): X-Ray traces and CloudWatch metrics (EMF on stdout). CDK turns
    # both on for deployed functions; off, nothing is traced or written (local mode, tests).
    tracing: bool = False
    metrics: bool = False
    # What the deployment keeps beyond this service's reach: the erase report reads these, so it
    # says what is true of the stage (CDK sets them from the same stage configuration).
    pitr_enabled: bool = False
    pitr_retention_days: int = 35
    stream_enabled: bool = False
    stream_retention_hours: int = 24
    search_snapshot_retention_days: int = 0
    # Recall: an OpenSearch endpoint and a Bedrock embedding model in AWS; none means recall answers
    # memory_unavailable. Local mode uses the embedded engine instead.
    search_endpoint: str = ""
    search_index: str = "uhp-recall-v1"
    search_replicas: int = 1
    # Primary shards of the recall index when a function creates it (the stage's search.shards).
    search_shards: int = Field(default=1, ge=1, le=1024)
    embedding_model_id: str = "amazon.titan-embed-text-v2:0"
    embedding_dimensions: int = 1024
    # Recall abstains below this best cosine similarity; None: the value calibrated for the model.
    abstain_similarity: float | None = None
    # Derivation (§5.1): which model turns episodes into facts after observe answers, if any
    # (uhp_memories.derivation). "bedrock": the Converse API with `derivation_model` (a model or inference
    # profile id); "openai": an OpenAI-compatible chat endpoint at `derivation_base_url` serving
    # `derivation_model`, its key from `derivation_api_key` (local) or the Secrets Manager secret
    # `derivation_api_key_secret` (AWS). "none": observe keeps the episodes and derives nothing.
    derivation: Literal["none", "bedrock", "openai"] = "none"
    derivation_model: str = ""
    derivation_base_url: str = ""
    derivation_api_key: str = Field(default="", repr=False)
    derivation_api_key_secret: str = ""
    derivation_max_tokens: int = Field(default=4096, ge=256, le=65536)
    # A provider beside the native one (§10): mem0 (uhp_memories/adapters/mem0.py). "oss": mem0's own
    # library in this process, its stores under `mem0_folder` (none: a folder of the process's own); with
    # `mem0_infer`, mem0 derives with the stage's OpenAI-compatible derivation endpoint. "platform": mem0's
    # hosted service, its API key from `mem0_api_key` (local) or the Secrets Manager secret
    # `mem0_api_key_secret` (AWS). "none": only the native provider.
    mem0: Literal["none", "oss", "platform"] = "none"
    mem0_folder: str = ""
    mem0_infer: bool = False
    mem0_api_key: str = Field(default="", repr=False)
    mem0_api_key_secret: str = ""
    mem0_host: str = ""
    # The longest one call to mem0 may take (bounded further by the request's own deadline): past it the
    # answer is memory_unavailable (502), never a request held until the gateway gives up. A stage whose
    # mem0 derives with a model (`mem0_infer`) gives it the time its model takes.
    mem0_timeout_seconds: float = Field(default=5.0, gt=0, le=25)

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
            erase_state_machine_arn=env.get("UHP_ERASE_STATE_MACHINE_ARN", ""),
            delete_state_machine_arn=env.get("UHP_DELETE_STATE_MACHINE_ARN", ""),
            consolidate_state_machine_arn=env.get("UHP_CONSOLIDATE_STATE_MACHINE_ARN", ""),
            derive_state_machine_arn=env.get("UHP_DERIVE_STATE_MACHINE_ARN", ""),
            schedule_group=env.get("UHP_SCHEDULE_GROUP", ""),
            schedule_target_arn=env.get("UHP_SCHEDULE_TARGET_ARN", ""),
            schedule_role_arn=env.get("UHP_SCHEDULE_ROLE_ARN", ""),
            workflow_wait_seconds=float(env.get("UHP_WORKFLOW_WAIT_SECONDS", "20")),
            tracing=env.get("UHP_TRACING", "false").lower() == "true",
            metrics=env.get("UHP_METRICS", "false").lower() == "true",
            pitr_enabled=env.get("UHP_PITR_ENABLED", "false").lower() == "true",
            pitr_retention_days=int(env.get("UHP_PITR_RETENTION_DAYS", "35")),
            stream_enabled=env.get("UHP_STREAM_ENABLED", "false").lower() == "true",
            search_snapshot_retention_days=int(env.get("UHP_SEARCH_SNAPSHOT_RETENTION_DAYS", "0")),
            search_endpoint=env.get("UHP_SEARCH_ENDPOINT", ""),
            search_index=env.get("UHP_SEARCH_INDEX", "uhp-recall-v1"),
            search_replicas=int(env.get("UHP_SEARCH_REPLICAS", "1")),
            search_shards=int(env.get("UHP_SEARCH_SHARDS", "1")),
            embedding_model_id=env.get("UHP_EMBEDDING_MODEL_ID", "amazon.titan-embed-text-v2:0"),
            embedding_dimensions=int(env.get("UHP_EMBEDDING_DIMENSIONS", "1024")),
            abstain_similarity=float(env["UHP_ABSTAIN_SIMILARITY"]) if env.get("UHP_ABSTAIN_SIMILARITY") else None,
            derivation=env.get("UHP_DERIVATION", "none"),  # type: ignore[arg-type]  # validated by the model
            derivation_model=env.get("UHP_DERIVATION_MODEL", ""),
            derivation_base_url=env.get("UHP_DERIVATION_BASE_URL", ""),
            derivation_api_key=env.get("UHP_DERIVATION_API_KEY", ""),
            derivation_api_key_secret=env.get("UHP_DERIVATION_API_KEY_SECRET", ""),
            derivation_max_tokens=int(env.get("UHP_DERIVATION_MAX_TOKENS", "4096")),
            mem0=env.get("UHP_MEM0", "none"),  # type: ignore[arg-type]  # validated by the model
            mem0_folder=env.get("UHP_MEM0_FOLDER", ""),
            mem0_infer=env.get("UHP_MEM0_INFER", "false").lower() == "true",
            mem0_api_key=env.get("UHP_MEM0_API_KEY", ""),
            mem0_api_key_secret=env.get("UHP_MEM0_API_KEY_SECRET", ""),
            mem0_host=env.get("UHP_MEM0_HOST", ""),
            mem0_timeout_seconds=float(env.get("UHP_MEM0_TIMEOUT_SECONDS", "5")),
        )
