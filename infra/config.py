"""Stage configuration: one validated model per deployed stage, read from cdk.json context.

cdk.json holds every stage under the context key ``uhp-memories:stages``; ``-c stage=NAME`` picks
one (default ``dev``). There are no per-command overrides of single values: a stage is what cdk.json
says it is, and the functions get its backup settings in their environment, so what the erase
report says about backups is true of the deployed stage.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

STAGES_CONTEXT_KEY = "uhp-memories:stages"
STAGE_CONTEXT_KEY = "stage"
DEFAULT_STAGE = "dev"

# CloudWatch Logs accepts only these retention periods.
LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)
TITAN_V2_DIMENSIONS = (256, 512, 1024)
OPENSEARCH_SNAPSHOT_DAYS = 14


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class SearchConfig(_Strict):
    """The OpenSearch Service domain behind recall (k-NN + BM25)."""

    enabled: bool = Field(default=True, description="create the domain (recall needs it once the indexer lands)")
    engine_version: str = Field(default="OpenSearch_2.19", pattern=r"^OpenSearch_\d+\.\d+$")
    instance_type: str = Field(default="t3.small.search", pattern=r"^[a-z0-9]+\.[a-z0-9]+\.search$")
    instance_count: int = Field(default=1, ge=1, le=80)
    volume_gb: int = Field(default=10, ge=10, le=3072, description="gp3 EBS per data node")
    dedicated_master_type: str | None = Field(default=None, pattern=r"^[a-z0-9]+\.[a-z0-9]+\.search$")
    dedicated_master_count: int = Field(default=0, description="0, 3 or 5")
    availability_zones: Literal[2, 3] = Field(default=2, description="used when instance_count > 1")
    index_name: str = Field(
        default="uhp-recall-v1",
        pattern=r"^[a-z0-9][a-z0-9_-]{0,99}$",
        description="the recall index the functions use (rebuild into a new one with `uhp-memories reindex`)",
    )
    shards: int = Field(
        default=1,
        ge=1,
        le=1024,
        description="primary shards of the recall index when it is created (fixed then: changing it means a "
        "rebuild, `reindex --from-scratch` or into a new index_name); aim for 10 to 50 GB a shard",
    )

    @model_validator(mode="after")
    def _consistent(self) -> SearchConfig:
        if self.dedicated_master_count not in (0, 3, 5):
            raise ValueError("dedicated_master_count must be 0, 3 or 5")
        if self.dedicated_master_count and not self.dedicated_master_type:
            raise ValueError("dedicated_master_type is required with dedicated master nodes")
        if self.instance_type.startswith("t3.") and self.instance_count > 10:
            raise ValueError("t3 instances are for small domains (at most 10 nodes)")
        if self.zone_awareness and self.instance_count % self.availability_zones:
            raise ValueError("instance_count must be a multiple of availability_zones")
        return self

    @property
    def zone_awareness(self) -> bool:
        return self.instance_count > 1

    @property
    def replicas(self) -> int:
        """Replicas of the recall index when the functions create it: one, where a second node can hold it."""
        return 1 if self.instance_count > 1 else 0


class EmbeddingsConfig(_Strict):
    """The Bedrock model that embeds record text in production."""

    model_id: str = Field(default="amazon.titan-embed-text-v2:0", min_length=3, max_length=200)
    dimensions: int = Field(default=1024, ge=1, le=8192)
    abstain_similarity: float | None = Field(
        default=None,
        ge=-1,
        le=1,
        description="recall abstains below this best cosine similarity of a query; calibrate it for the model "
        "with bench/calibrate_abstain.py (unset: the value calibrated in code, 0.30 for a model not calibrated)",
    )

    @model_validator(mode="after")
    def _dimensions_fit_model(self) -> EmbeddingsConfig:
        if self.model_id.startswith("amazon.titan-embed-text-v2") and self.dimensions not in TITAN_V2_DIMENSIONS:
            raise ValueError(f"Titan Text Embeddings v2 produces {TITAN_V2_DIMENSIONS} dimensions")
        return self

    def environment(self) -> dict[str, str]:
        """What every function that opens the index reads (uhp_memories.settings): the model, since the
        index never mixes models, and the abstain threshold calibrated for it, when set."""
        environment = {"UHP_EMBEDDING_MODEL_ID": self.model_id, "UHP_EMBEDDING_DIMENSIONS": str(self.dimensions)}
        if self.abstain_similarity is not None:
            environment["UHP_ABSTAIN_SIMILARITY"] = str(self.abstain_similarity)
        return environment


# Bedrock's cross-region inference profiles: an id with one of these prefixes names a profile, which
# routes to the foundation model in any region of its geography.
INFERENCE_PROFILE_PREFIXES = ("us.", "eu.", "apac.", "us-gov.", "jp.", "au.", "ca.", "global.")


class DerivationConfig(_Strict):
    """The model that derives facts and notes from episodes after observe answers (domain/observing/service.py),
    if any. Only the derive step calls it, and only it gets the permission to."""

    provider: Literal["none", "bedrock", "openai"] = Field(
        default="none", description="none: observe keeps episodes and derives nothing (derivation: none)"
    )
    model_id: str = Field(
        default="", max_length=200,
        description="bedrock: a model id (amazon.nova-lite-v1:0) or an inference profile id (us.anthropic...); "
        "openai: the model name the endpoint serves",
    )
    base_url: str = Field(default="", max_length=500, description="openai: the endpoint's https base URL")
    api_key_secret_arn: str | None = Field(
        default=None, pattern=r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:.+$",
        description="openai: the Secrets Manager secret holding the endpoint's API key (none: no key)",
    )
    max_tokens: int = Field(default=4096, ge=256, le=65536, description="the longest answer a derivation may get")

    @model_validator(mode="after")
    def _complete(self) -> DerivationConfig:
        if self.provider == "none":
            if self.model_id or self.base_url or self.api_key_secret_arn:
                raise ValueError("derivation.provider none takes no model_id, base_url or api_key_secret_arn")
            return self
        if not self.model_id:
            raise ValueError(f"derivation.provider {self.provider} needs a model_id")
        if self.provider == "bedrock" and (self.base_url or self.api_key_secret_arn):
            raise ValueError("derivation.provider bedrock takes no base_url or api_key_secret_arn")
        if self.provider == "openai" and not self.base_url.startswith("https://"):
            raise ValueError("derivation.provider openai needs an https:// base_url (the key travels with it)")
        return self

    @property
    def inference_profile(self) -> bool:
        return self.provider == "bedrock" and self.model_id.startswith(INFERENCE_PROFILE_PREFIXES)

    @property
    def foundation_model_id(self) -> str:
        """The foundation model a Bedrock id names (an inference profile's without its geography)."""
        return self.model_id.split(".", 1)[1] if self.inference_profile else self.model_id

    def environment(self) -> dict[str, str]:
        """What the derive step reads (uhp_memories.settings), and what observe reads to know it derives."""
        if self.provider == "none":
            return {}
        environment = {
            "UHP_DERIVATION": self.provider,
            "UHP_DERIVATION_MODEL": self.model_id,
            "UHP_DERIVATION_MAX_TOKENS": str(self.max_tokens),
        }
        if self.provider == "openai":
            environment["UHP_DERIVATION_BASE_URL"] = self.base_url
            if self.api_key_secret_arn:
                environment["UHP_DERIVATION_API_KEY_SECRET"] = self.api_key_secret_arn
        return environment


# A Secrets Manager secret: its complete ARN (with the six characters Secrets Manager appends to the name), or
# its name in the stage's own account and region.
SECRET_ARN_PATTERN = r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+-[A-Za-z0-9]{6}$"
SECRET_NAME_PATTERN = r"^[A-Za-z0-9/_+=.@-]{1,512}$"
KMS_KEY_ARN_PATTERN = r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]+$"


class Mem0Config(_Strict):
    """The mem0 provider beside the native one (§10; uhp_memories/adapters/mem0.py), when the stage connects
    it: a memory created with `"provider": "mem0"` keeps its records there. Only the functions that reach such
    records (infra/catalog.py `mem0="connect"`) get mem0's library and its credential."""

    mode: Literal["none", "platform", "oss"] = Field(
        default="none",
        description="none: only the native provider; platform: mem0's hosted service (mem0.MemoryClient) with "
        "the key in `api_key_secret`; oss: not deployable yet (see the validator)",
    )
    api_key_secret: str | None = Field(
        default=None, max_length=2048,
        description="platform: the existing Secrets Manager secret holding the Platform API key (its plain "
        "SecretString), by name (this account and region) or by complete ARN",
    )
    api_key_kms_key_arn: str | None = Field(
        default=None, pattern=KMS_KEY_ARN_PATTERN,
        description="platform: the customer managed KMS key the secret is encrypted with, if not AWS managed "
        "(the connecting functions may decrypt with it, through Secrets Manager only)",
    )
    host: str | None = Field(
        default=None, pattern=r"^https://[^\s/]+(/[^\s]*)?$", max_length=500,
        description="platform: the Platform API's base URL (none: mem0's own, https://api.mem0.ai)",
    )

    @model_validator(mode="after")
    def _complete(self) -> Mem0Config:
        if self.mode == "oss":
            # docs/decisions.md "The mem0 provider": mem0.Memory keeps every text of a record in a SQLite
            # history file; on Lambda that file would live on one instance's /tmp and die with it, so history
            # and erase would not be what the provider's capability document declares.
            raise ValueError(
                "mem0.mode oss is not supported on a deployed stage yet: mem0 OSS keeps its history in a SQLite "
                "file, which no Lambda keeps (each instance has its own /tmp, gone with it). Use mode platform, "
                "or mem0 OSS locally (uhp-memories serve --mem0 oss)"
            )
        if self.mode == "none":
            if self.api_key_secret or self.api_key_kms_key_arn or self.host:
                raise ValueError("mem0.mode none takes no api_key_secret, api_key_kms_key_arn or host")
            return self
        if not self.api_key_secret:
            raise ValueError("mem0.mode platform needs api_key_secret: the Secrets Manager secret holding the key")
        if not (re.match(SECRET_ARN_PATTERN, self.api_key_secret) or re.match(SECRET_NAME_PATTERN,
                                                                                self.api_key_secret)):
            raise ValueError(
                "mem0.api_key_secret is a secret's name, or its complete ARN as create-secret printed it "
                "(ending in -xxxxxx)"
            )
        return self

    @property
    def connects(self) -> bool:
        return self.mode != "none"

    @property
    def secret_is_arn(self) -> bool:
        return bool(self.api_key_secret and self.api_key_secret.startswith("arn:"))

    def declared_environment(self) -> dict[str, str]:
        """What a function that only needs to know which providers the stage offers reads (the mode names
        the provider and its capability document)."""
        return {"UHP_MEM0": self.mode} if self.connects else {}

    def connect_environment(self) -> dict[str, str]:
        """What a function that reaches mem0's records reads (uhp_memories.settings, bootstrap.build_providers)."""
        if not self.connects:
            return {}
        environment = {**self.declared_environment(), "UHP_MEM0_API_KEY_SECRET": str(self.api_key_secret)}
        if self.host:
            environment["UHP_MEM0_HOST"] = self.host
        return environment


class ApiConfig(_Strict):
    """API Gateway: stage-wide limits, and the defaults of each tenant's usage plan."""

    stage_name: str = Field(default="v1", pattern=r"^[A-Za-z0-9_]{1,64}$", description="API Gateway stage")
    throttle_rate: float = Field(default=500, gt=0, description="requests per second, the whole stage")
    throttle_burst: int = Field(default=1000, ge=1)
    tenant_rate: float = Field(default=50, gt=0, description="default requests per second of one tenant")
    tenant_burst: int = Field(default=100, ge=1)
    tenant_quota_per_month: int = Field(default=5_000_000, ge=1)
    authorizer_cache_seconds: int = Field(
        default=300,
        ge=0,
        le=3600,
        description="how long a key's answer is cached; a revoked key lasts this long at most",
    )
    waf: bool = Field(default=True, description="AWS WAF web ACL: managed rules and a per-IP rate limit")
    waf_requests_per_5_minutes_per_ip: int = Field(default=3000, ge=100, le=2_000_000_000)
    detailed_metrics: bool = Field(
        default=False,
        description="API Gateway's per-method CloudWatch metrics (count, 4xx, 5xx, latency of each route), "
        "billed as custom metrics; the API's own metrics are there without them",
    )
    cloudwatch_role: bool = Field(
        default=True,
        description="set the account's API Gateway CloudWatch Logs role (needed once per account and region "
        "for execution logs; turn off when another stack already sets it)",
    )


class EncryptionConfig(_Strict):
    """Encryption at rest: AWS managed keys, or one customer managed KMS key for the stage's data."""

    customer_managed_key: bool = Field(
        default=False,
        description="one KMS key of the stage's own (rotated yearly) for the tables, the files bucket, the "
        "search domain, the indexer's dead-letter queue and every log group; off: AWS managed keys",
    )


class StageConfig(_Strict):
    """Everything that differs between stages. See docs/deploy.md for each field."""

    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,19}$")
    account: str | None = Field(default=None, pattern=r"^\d{12}$")
    region: str | None = Field(default=None, pattern=r"^[a-z]{2}(-[a-z]+)+-\d$")
    removal_policy: Literal["retain", "destroy"] = Field(
        default="retain", description="what `cdk destroy` does to tables, the bucket, the domain and log groups"
    )
    point_in_time_recovery: bool = True
    backup_retention_days: int = Field(default=35, ge=1, le=35, description="the PITR recovery window")
    upload_retention_days: int = Field(
        default=7, ge=1, le=3650, description="how long an upload no record took is kept in S3"
    )
    log_retention_days: int = Field(default=30)
    idempotency_seconds: int = Field(default=24 * 3600, ge=60, le=30 * 24 * 3600)
    lambda_memory_mb: int = Field(default=1024, ge=128, le=10240)
    alarm_email: str | None = Field(default=None, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
    alarm_account_concurrency: int = Field(
        default=800,
        ge=1,
        le=1_000_000,
        description="the account's Lambda concurrent executions in the stage's region (every function of the "
        "account, not only the stage's) at which the AccountConcurrency alarm fires: 80 % of Lambda's default "
        "limit of 1,000; set it to 80 % of the account's own limit (Service Quotas) when that was raised",
    )
    api: ApiConfig = ApiConfig()
    search: SearchConfig = SearchConfig()
    embeddings: EmbeddingsConfig = EmbeddingsConfig()
    derivation: DerivationConfig = DerivationConfig()
    encryption: EncryptionConfig = EncryptionConfig()
    mem0: Mem0Config = Mem0Config()

    @field_validator("log_retention_days")
    @classmethod
    def _known_retention(cls, value: int) -> int:
        if value not in LOG_RETENTION_DAYS:
            raise ValueError(f"CloudWatch Logs retention must be one of {LOG_RETENTION_DAYS}")
        return value

    @property
    def stack_name(self) -> str:
        return f"uhp-memories-{self.name}"

    @property
    def retain(self) -> bool:
        return self.removal_policy == "retain"

    def data_protection_environment(self, *, stream: bool) -> dict[str, str]:
        """What outlives an erase in this stage, as uhp_memories.settings reads it: the erase report
        states these, so they must be the deployed truth."""
        return {
            "UHP_STAGE": self.name,
            "UHP_PITR_ENABLED": "true" if self.point_in_time_recovery else "false",
            "UHP_PITR_RETENTION_DAYS": str(self.backup_retention_days if self.point_in_time_recovery else 0),
            # DynamoDB streams keep changes for 24 hours; the setting is not configurable.
            "UHP_STREAM_ENABLED": "true" if stream else "false",
            # OpenSearch Service keeps its automated hourly snapshots for 14 days.
            "UHP_SEARCH_SNAPSHOT_RETENTION_DAYS": str(OPENSEARCH_SNAPSHOT_DAYS if self.search.enabled else 0),
        }


class StageConfigError(ValueError):
    pass


def load_stage(context: Any) -> StageConfig:
    """The stage named by context ``stage`` (default dev), validated.

    ``context`` is anything with ``try_get_context`` (a construct's node) or a plain dict.
    """
    get = context.get if isinstance(context, dict) else context.try_get_context
    stages = get(STAGES_CONTEXT_KEY) or {}
    name = get(STAGE_CONTEXT_KEY) or DEFAULT_STAGE
    if name not in stages:
        known = ", ".join(sorted(stages)) or "none"
        raise StageConfigError(f"no stage {name!r} under {STAGES_CONTEXT_KEY!r} in cdk.json (stages: {known})")
    try:
        return StageConfig.model_validate({"name": name, **stages[name]})
    except ValidationError as error:
        raise StageConfigError(f"stage {name!r} in cdk.json is invalid:\n{error}") from error
