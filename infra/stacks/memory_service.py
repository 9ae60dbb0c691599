"""One stage of the memory service. The stack only composes constructs and names its outputs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import Aspects, CfnOutput, Stack
from constructs import Construct

from infra.catalog import FUNCTION_ACCESS, STEPS_PACKAGE, Access
from infra.config import StageConfig
from infra.constructs.api import Api
from infra.constructs.auth import Auth
from infra.constructs.compute import ServiceFunctions
from infra.constructs.data import DataStores
from infra.constructs.derivation import Derivation
from infra.constructs.embeddings import Embeddings
from infra.constructs.encryption import LogGroupsEncryptedWith, StageKey
from infra.constructs.functions import ServiceFunction, removal_policy_of
from infra.constructs.mem0 import Mem0
from infra.constructs.monitoring import Monitoring
from infra.constructs.packaging import Packaging
from infra.constructs.schedules import TIMER_FUNCTION, ConsolidationSchedules
from infra.constructs.search import Search
from infra.constructs.workflows import Workflows
from infra.layout import REPO, Layout
from uhp_memories import stage_outputs as outputs
from uhp_memories.api.routes import ROUTES
from uhp_memories.workflows import STEPS, WORKFLOWS

# Output names (uhp_memories.stage_outputs): the admin CLI reads them, local mode mirrors them.
OUTPUTS = outputs.OUTPUTS
SEARCH_OUTPUTS = outputs.SEARCH_OUTPUTS


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
        self.key = (
            StageKey(self, "Encryption", config=config, removal_policy=removal_policy_of(config))
            if config.encryption.customer_managed_key
            else None
        )
        if self.key is not None:
            Aspects.of(self).add(LogGroupsEncryptedWith(self.key.key))
        self.data = DataStores(self, "Data", config=config, key=self.key)
        self.packaging = Packaging(self, "Packaging", layout=layout, removal_policy=removal_policy_of(config))
        self.search = Search(self, "Search", config=config, key=self.key) if config.search.enabled else None
        self.embeddings = Embeddings(self, "Embeddings", config=config.embeddings)
        self.derivation = Derivation(self, "Derivation", config=config.derivation)
        self.mem0 = Mem0(self, "Mem0", config=config.mem0)
        self.functions = ServiceFunctions(
            self,
            "Functions",
            config=config,
            layout=layout,
            packaging=self.packaging,
            data=self.data,
            search=self.search,
            embeddings=self.embeddings,
            derivation=self.derivation,
            mem0=self.mem0,
            catalog=catalog,
            key=self.key,
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
        self.schedules = ConsolidationSchedules(
            self, "Schedules", config=config, timer=self.functions.functions[TIMER_FUNCTION]
        )
        for name, access in self.functions.access.items():
            if access.schedules:
                self.schedules.grant_manage(self.functions.functions[name])
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
            outputs.API_URL: api.rest_api.url,
            outputs.REST_API_ID: api.rest_api.rest_api_id,
            outputs.API_STAGE_NAME: api.stage.stage_name,
            outputs.MAIN_TABLE_NAME: data.main_table.table_name,
            outputs.KEYS_TABLE_NAME: data.keys_table.table_name,
            outputs.IDEMPOTENCY_TABLE_NAME: data.idempotency_table.table_name,
            outputs.FILES_BUCKET_NAME: data.files_bucket.bucket_name,
            outputs.ALARM_TOPIC_ARN: self.monitoring.topic.topic_arn,
            outputs.TENANT_RATE_LIMIT: str(self.config.api.tenant_rate),
            outputs.TENANT_BURST_LIMIT: str(self.config.api.tenant_burst),
            outputs.TENANT_QUOTA_PER_MONTH: str(self.config.api.tenant_quota_per_month),
        }
        if self.search is not None:
            values |= {
                outputs.SEARCH_ENDPOINT: self.search.url,
                outputs.SEARCH_INDEX_NAME: self.config.search.index_name,
                outputs.SEARCH_INDEX_REPLICAS: str(self.config.search.replicas),
                outputs.SEARCH_INDEX_SHARDS: str(self.config.search.shards),
                outputs.EMBEDDING_MODEL_ID: self.config.embeddings.model_id,
                outputs.EMBEDDING_DIMENSIONS: str(self.config.embeddings.dimensions),
            }
        for name, value in values.items():
            CfnOutput(self, name, value=value)
