"""One stage of the memory service. The stack only composes constructs and names its outputs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from infra.catalog import FUNCTION_ACCESS, STEPS_PACKAGE, Access
from infra.config import StageConfig
from infra.constructs.api import Api
from infra.constructs.auth import Auth
from infra.constructs.compute import ServiceFunctions
from infra.constructs.data import DataStores
from infra.constructs.embeddings import Embeddings
from infra.constructs.functions import ServiceFunction, removal_policy_of
from infra.constructs.monitoring import Monitoring
from infra.constructs.packaging import Packaging
from infra.constructs.search import Search
from infra.constructs.workflows import Workflows
from infra.layout import REPO, Layout
from uhp_memories.api.routes import ROUTES
from uhp_memories.workflows import STEPS, WORKFLOWS

# Output names the admin CLI reads (uhp_memories.admin.target).
OUTPUTS = (
    "ApiUrl",
    "RestApiId",
    "ApiStageName",
    "MainTableName",
    "KeysTableName",
    "IdempotencyTableName",
    "FilesBucketName",
    "AlarmTopicArn",
    "TenantRateLimit",
    "TenantBurstLimit",
    "TenantQuotaPerMonth",
)
# With a search domain (`uhp-memories reindex` reads them).
SEARCH_OUTPUTS = ("SearchEndpoint", "SearchIndexName", "SearchIndexReplicas", "EmbeddingModelId", "EmbeddingDimensions")


class MemoryServiceStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        layout: Layout = REPO,
        catalog: Mapping[str, Access] = FUNCTION_ACCESS,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            scope, construct_id, description=f"uhp-memories: Harness Memories service, stage {config.name}", **kwargs
        )
        self.config = config
        self.data = DataStores(self, "Data", config=config)
        self.packaging = Packaging(self, "Packaging", layout=layout, removal_policy=removal_policy_of(config))
        self.search = Search(self, "Search", config=config) if config.search.enabled else None
        self.embeddings = Embeddings(self, "Embeddings", config=config.embeddings)
        self.functions = ServiceFunctions(
            self,
            "Functions",
            config=config,
            layout=layout,
            packaging=self.packaging,
            data=self.data,
            search=self.search,
            embeddings=self.embeddings,
            catalog=catalog,
        )
        self.workflows = Workflows(
            self,
            "Workflows",
            config=config,
            workflows_dir=layout.workflows_dir,
            steps=self._steps(),
            names={file: name for name, file in WORKFLOWS.items()},
        )
        self.functions.grant_workflow_starts(self.workflows)
        self.auth = Auth(self, "Auth", function=self.functions.authorizer, config=config)
        self.api = Api(
            self,
            "Api",
            config=config,
            routes=ROUTES,
            functions={name: fn.function for name, fn in self.functions.of_kind("api").items()},
            authorizer=self.auth.authorizer,
        )
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            config=config,
            api=self.api.rest_api,
            functions=self.functions.functions,
            main_table=self.data.main_table,
            state_machines=self.workflows.state_machines,
            stream_dead_letters=self.functions.stream_dead_letters,
            search=self.search,
        )
        self._outputs()

    def _steps(self) -> dict[str, ServiceFunction]:
        """ASL substitution -> the Lambda of the step handler it names."""
        functions = self.functions.functions
        return {
            sub: functions[f"{STEPS_PACKAGE}.{handler}"]
            for sub, handler in STEPS.items()
            if f"{STEPS_PACKAGE}.{handler}" in functions
        }

    def _outputs(self) -> None:
        api, data = self.api, self.data
        values = {
            "ApiUrl": api.rest_api.url,
            "RestApiId": api.rest_api.rest_api_id,
            "ApiStageName": api.stage.stage_name,
            "MainTableName": data.main_table.table_name,
            "KeysTableName": data.keys_table.table_name,
            "IdempotencyTableName": data.idempotency_table.table_name,
            "FilesBucketName": data.files_bucket.bucket_name,
            "AlarmTopicArn": self.monitoring.topic.topic_arn,
            "TenantRateLimit": str(self.config.api.tenant_rate),
            "TenantBurstLimit": str(self.config.api.tenant_burst),
            "TenantQuotaPerMonth": str(self.config.api.tenant_quota_per_month),
        }
        if self.search is not None:
            # What `uhp-memories reindex --stack` needs to open the index as the functions do.
            values["SearchEndpoint"] = self.search.url
            values["SearchIndexName"] = self.config.search.index_name
            values["SearchIndexReplicas"] = str(self.config.search.replicas)
            values["EmbeddingModelId"] = self.config.embeddings.model_id
            values["EmbeddingDimensions"] = str(self.config.embeddings.dimensions)
        for name, value in values.items():
            CfnOutput(self, name, value=value)
