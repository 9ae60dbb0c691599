"""The names of a stage's CloudFormation outputs: a wire contract between the stack that declares them
(infra/stacks/memory_service.py), the admin CLI that reads them (uhp_memories.admin.target for
`tenants`/`keys`, uhp_memories.admin.reindex for `reindex`) and local mode, which describes its
stage by the same names (uhp_memories.local.moto_env.LocalAws.outputs)."""

from __future__ import annotations

API_URL = "ApiUrl"
REST_API_ID = "RestApiId"
API_STAGE_NAME = "ApiStageName"
MAIN_TABLE_NAME = "MainTableName"
KEYS_TABLE_NAME = "KeysTableName"
IDEMPOTENCY_TABLE_NAME = "IdempotencyTableName"
FILES_BUCKET_NAME = "FilesBucketName"
ALARM_TOPIC_ARN = "AlarmTopicArn"
TENANT_RATE_LIMIT = "TenantRateLimit"
TENANT_BURST_LIMIT = "TenantBurstLimit"
TENANT_QUOTA_PER_MONTH = "TenantQuotaPerMonth"
# With a search domain: what `uhp-memories reindex --stack` needs to open the index as the functions do.
SEARCH_ENDPOINT = "SearchEndpoint"
SEARCH_INDEX_NAME = "SearchIndexName"
SEARCH_INDEX_REPLICAS = "SearchIndexReplicas"
SEARCH_INDEX_SHARDS = "SearchIndexShards"
EMBEDDING_MODEL_ID = "EmbeddingModelId"
EMBEDDING_DIMENSIONS = "EmbeddingDimensions"

# Every stage has these.
OUTPUTS = (
    API_URL,
    REST_API_ID,
    API_STAGE_NAME,
    MAIN_TABLE_NAME,
    KEYS_TABLE_NAME,
    IDEMPOTENCY_TABLE_NAME,
    FILES_BUCKET_NAME,
    ALARM_TOPIC_ARN,
    TENANT_RATE_LIMIT,
    TENANT_BURST_LIMIT,
    TENANT_QUOTA_PER_MONTH,
)
# A stage with a search domain has these too.
SEARCH_OUTPUTS = (
    SEARCH_ENDPOINT,
    SEARCH_INDEX_NAME,
    SEARCH_INDEX_REPLICAS,
    SEARCH_INDEX_SHARDS,
    EMBEDDING_MODEL_ID,
    EMBEDDING_DIMENSIONS,
)
# What the `tenants` and `keys` commands cannot do without.
ADMIN_REQUIRED = (REST_API_ID, API_STAGE_NAME, KEYS_TABLE_NAME)
