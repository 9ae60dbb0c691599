"""The recall index: an OpenSearch Service domain (k-NN and BM25 are built into OpenSearch).

Encrypted at rest and between nodes, HTTPS with TLS 1.2 only, and no resource policy: only IAM
principals of this account whose own policy allows it (the functions granted `search` in
infra/catalog.py) can sign requests to it. The index is derived data: it can always be rebuilt from
DynamoDB, so it is sized for speed, not durability.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_opensearchservice as opensearch
from constructs import Construct

from infra.config import SearchConfig, StageConfig
from infra.constructs.encryption import StageKey
from infra.constructs.functions import ServiceFunction, log_retention, removal_policy_of
from infra.nag import acknowledge

# What the functions send the domain (uhp_memories/adapters/opensearch, adapters/opensearch/free_query.py), as
# (actions, paths under the domain); {index} is the stage's recall index. No domain configuration
# action, and no ESHttpDelete: only the operator's `reindex --from-scratch` deletes the index.
# Reading: does the index exist (HEAD), its mapping and a document by id (GET), and searches, which are
# POSTs: _msearch at the root (each search names the index in the body) and _search on the index.
SEARCH_READ: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("es:ESHttpGet", "es:ESHttpHead"), ("{index}", "{index}/*")),
    (("es:ESHttpPost",), ("_msearch", "{index}/_search")),
)
# Writing, besides reading: create the index on first use (PUT), index and delete documents in bulk
# (POST _bulk, which names the index in the body) and drop a memory's documents (_delete_by_query).
SEARCH_WRITE: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("es:ESHttpPut",), ("{index}",)),
    (("es:ESHttpPost",), ("_bulk", "{index}/_delete_by_query")),
)


class Search(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: StageConfig, key: StageKey | None = None
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self.key = key
        search = config.search
        self.log_groups = {
            kind: logs.LogGroup(
                self,
                f"{kind}Logs",
                retention=log_retention(config.log_retention_days),
                removal_policy=removal_policy_of(config),
            )
            for kind in ("SlowSearch", "SlowIndex", "Application")
        }
        # One explicit resource policy for the three log groups (the domain's own would be a custom
        # resource with a Lambda of its own).
        self.logs_policy = logs.ResourcePolicy(
            self,
            "LogsPolicy",
            policy_statements=[
                iam.PolicyStatement(
                    principals=[iam.ServicePrincipal("es.amazonaws.com")],
                    actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                    resources=[group.log_group_arn for group in self.log_groups.values()],
                )
            ],
        )
        self.domain = self._build_domain(search)
        self.domain.node.add_dependency(self.logs_policy)
        self._acknowledge_findings(search)

    def _build_domain(self, search: SearchConfig) -> opensearch.Domain:
        version = search.engine_version.removeprefix("OpenSearch_")
        return opensearch.Domain(
            self,
            "Domain",
            version=opensearch.EngineVersion.open_search(version),
            capacity=opensearch.CapacityConfig(
                data_nodes=search.instance_count,
                data_node_instance_type=search.instance_type,
                master_nodes=search.dedicated_master_count or None,
                master_node_instance_type=search.dedicated_master_type,
                multi_az_with_standby_enabled=False,
            ),
            ebs=opensearch.EbsOptions(volume_size=search.volume_gb, volume_type=ec2.EbsDeviceVolumeType.GP3),
            zone_awareness=opensearch.ZoneAwarenessConfig(
                enabled=search.zone_awareness,
                availability_zone_count=search.availability_zones if search.zone_awareness else None,
            ),
            encryption_at_rest=opensearch.EncryptionAtRestOptions(
                enabled=True, kms_key=self.key.key if self.key else None
            ),
            node_to_node_encryption=True,
            enforce_https=True,
            tls_security_policy=opensearch.TLSSecurityPolicy.TLS_1_2,
            logging=opensearch.LoggingOptions(
                slow_search_log_enabled=True,
                slow_search_log_group=self.log_groups["SlowSearch"],
                slow_index_log_enabled=True,
                slow_index_log_group=self.log_groups["SlowIndex"],
                app_log_enabled=True,
                app_log_group=self.log_groups["Application"],
            ),
            suppress_logs_resource_policy=True,
            enable_version_upgrade=True,
            removal_policy=removal_policy_of(self._config),
        )

    def grant_read(self, function: ServiceFunction) -> None:
        """Searches and reads of the recall index: no document, index or mapping is written."""
        self._grant(function, SEARCH_READ)

    def grant_read_write(self, function: ServiceFunction) -> None:
        self._grant(function, SEARCH_READ + SEARCH_WRITE)

    def _grant(self, function: ServiceFunction, grants: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]) -> None:
        index = self._config.search.index_name
        for actions, paths in grants:
            function.allow(actions, [f"{self.domain.domain_arn}/{path.format(index=index)}" for path in paths])
        stack = Stack.of(self)
        logical_id = stack.resolve(stack.get_logical_id(self.domain.node.default_child))  # type: ignore[arg-type]
        acknowledge(
            function.role,
            f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>/{index}/*]",
            "Document ids and the index's own paths (_doc, _mapping) are named at run time; the role reaches "
            "this one index of this one domain, with document and search requests (no configuration actions).",
        )

    @property
    def endpoint(self) -> str:
        """The domain's host name (no scheme)."""
        return self.domain.domain_endpoint

    @property
    def url(self) -> str:
        return f"https://{self.domain.domain_endpoint}"

    @property
    def environment(self) -> dict[str, str]:
        """What uhp_memories.settings reads to reach the recall index."""
        search = self._config.search
        return {
            "UHP_SEARCH_ENDPOINT": self.url,
            "UHP_SEARCH_INDEX": search.index_name,
            "UHP_SEARCH_REPLICAS": str(search.replicas),
            "UHP_SEARCH_SHARDS": str(search.shards),
        }

    def _acknowledge_findings(self, search: SearchConfig) -> None:
        reason_public = (
            "The domain has a public endpoint so the functions need no VPC (and no NAT); it has no "
            "resource policy, accepts only HTTPS requests signed by IAM principals of this account that "
            "are granted es:ESHttp* (the functions), and encrypts data at rest and between nodes."
        )
        acknowledge(self.domain, "AwsSolutions-OS1", reason_public)
        acknowledge(self.domain, "AwsSolutions-OS3", reason_public)
        acknowledge(self.domain, "AwsSolutions-OS5", reason_public)
        if not search.dedicated_master_count:
            acknowledge(
                self.domain,
                "AwsSolutions-OS4",
                f"Stage {self._config.name} runs a small domain without dedicated master nodes (cdk.json); "
                "the index is derived data and can be rebuilt from DynamoDB.",
            )
        if not search.zone_awareness:
            acknowledge(
                self.domain,
                "AwsSolutions-OS7",
                f"Stage {self._config.name} runs a single-node domain (cdk.json); zone awareness needs two "
                "or more nodes, and the index can be rebuilt from DynamoDB.",
            )
