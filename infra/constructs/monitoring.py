"""Alarms and one dashboard.

Alarms: API 5xx; each function's errors (an invocation that failed or timed out) and throttles; the
main table's throttled requests; failed workflow executions; indexer backlog (stream iterator age and
failed batches of every stream consumer); recall answers that were degraded (the recall function's
own metric, uhp_memories/api/observability.py); and the search domain's recommended alarms (AWS,
"Recommended CloudWatch alarms for Amazon OpenSearch Service"): red and yellow status, writes
blocked, free storage, nodes missing, failed automated snapshots, CPU, JVM memory pressure (and the
dedicated masters' where there are any), CPU credits of burstable (t2, t3) instances, and the
customer managed key's errors where the stage encrypts with one. Beside those (issue 35): each
function's longest invocation near its timeout, Bedrock throttling the stage's models, and the
account's Lambda concurrency near its limit. Each alarm notifies one SNS topic, subscribed by the
stage's `alarm_email` when set.

The dashboard graphs what the alarms watch, and the request phases (access, embed, search, read-back:
uhp_memories/api/observability.py) of the functions that recall and write.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.functions import ServiceFunction
from infra.constructs.search import Search
from infra.nag import acknowledge
from uhp_memories.api.observability import NAMESPACE, PHASE_METRICS, RECALLS, RECALLS_DEGRADED

RECALL_FUNCTION = "recall"
# The functions whose request phases the dashboard graphs: recall's four, and the writes' access and embed.
PHASE_FUNCTIONS = (RECALL_FUNCTION, "records", "observe")

PERIOD = Duration.minutes(5)
MINUTE = Duration.minutes(1)
API_5XX_THRESHOLD = 5  # server errors in 5 minutes
INDEXER_MAX_ITERATOR_AGE_MS = 5 * 60 * 1000  # the index lags DynamoDB by more than 5 minutes
# Degraded recall answers in 5 minutes (a signal missing: the embedder, a search, a bound that bit).
RECALL_DEGRADED_THRESHOLD = 5
# The search domain, as AWS recommends: free storage at a quarter of a node's volume; CPU 80 % for 15
# minutes; JVM memory pressure 95 % (masters too) and old generation 80 %, three minutes running;
# masters' CPU 50 % for 15 minutes.
SEARCH_MIN_FREE_STORAGE_SHARE = 0.25
SEARCH_MAX_CPU_PERCENT = 80
SEARCH_MAX_JVM_MEMORY_PRESSURE_PERCENT = 95
SEARCH_MAX_OLD_GEN_JVM_MEMORY_PRESSURE_PERCENT = 80
SEARCH_MAX_MASTER_CPU_PERCENT = 50
# An invocation that took this share of its function's timeout (in 5 minutes): the next slower one
# times out (API functions answer within their request's deadline, so this is a bound that did not hold).
NEAR_TIMEOUT_SHARE = 0.9
# Bedrock refused calls to a model of the stage for its quota (requests or tokens a minute): the
# clients retry once, so a throttle is a write embedded late (by the indexer) or a recall degraded,
# and raising a quota takes days: the first one is worth knowing about.
BEDROCK_THROTTLES_THRESHOLD = 1
# The dashboard's alarm status widget shows at most 100 alarms (CloudWatch's limit): more take another.
ALARMS_PER_STATUS_WIDGET = 100
BURSTABLE_INSTANCE_PREFIXES = ("t2.", "t3.")
# The operations the service performs on the main table (an alarm's metric math takes 10 metrics at most).
THROTTLE_OPERATIONS = (
    dynamodb.Operation.GET_ITEM,
    dynamodb.Operation.QUERY,
    dynamodb.Operation.PUT_ITEM,
    dynamodb.Operation.UPDATE_ITEM,
    dynamodb.Operation.DELETE_ITEM,
    dynamodb.Operation.BATCH_WRITE_ITEM,
    dynamodb.Operation.TRANSACT_WRITE_ITEMS,
)


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        api: apigw.RestApi,
        functions: Mapping[str, ServiceFunction],
        main_table: dynamodb.Table,
        state_machines: Mapping[str, sfn.StateMachine],
        stream_dead_letters: Mapping[str, sqs.IQueue],
        search: Search | None,
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self.topic = self._build_topic()
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        self._api_alarms(api)
        self._function_alarms(functions)
        self._throttle_alarms(functions, main_table)
        self._workflow_alarms(state_machines)
        self._indexer_alarms(functions, stream_dead_letters)
        self._near_timeout_alarms(functions)
        self._bedrock_alarms()
        self._concurrency_alarm()
        self.recall_degraded = self._recall_metric(functions, RECALLS_DEGRADED)
        if self.recall_degraded is not None:
            self._alarm(
                "RecallDegraded",
                self.recall_degraded,
                RECALL_DEGRADED_THRESHOLD,
                f"{RECALL_DEGRADED_THRESHOLD} or more recall answers in 5 minutes were degraded (a signal or a "
                "search missing: see the recall function's logs)",
            )
        if search is not None:
            self._search_alarms(search)
        self.dashboard = self._build_dashboard(api, functions, main_table, state_machines, search)

    def _build_topic(self) -> sns.Topic:
        topic = sns.Topic(self, "AlarmTopic", display_name=f"uhp-memories {self._config.name} alarms", enforce_ssl=True)
        if self._config.alarm_email:
            topic.add_subscription(subscriptions.EmailSubscription(self._config.alarm_email))
        acknowledge(
            topic,
            "AwsSolutions-SNS2",
            "Alarm notifications carry alarm names and states only, never customer data; CloudWatch "
            "cannot publish to a topic encrypted with the AWS managed SNS key.",
        )
        return topic

    def _alarm(
        self,
        name: str,
        metric: cloudwatch.IMetric,
        threshold: float,
        description: str,
        comparison: cloudwatch.ComparisonOperator = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        periods: int = 1,
    ) -> cloudwatch.Alarm:
        """Alarm when `periods` periods running breach (each period is the metric's own)."""
        alarm = cloudwatch.Alarm(
            self,
            name,
            metric=metric,
            threshold=threshold,
            evaluation_periods=periods,
            comparison_operator=comparison,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"uhp-memories {self._config.name}: {description}",
        )
        alarm.add_alarm_action(actions.SnsAction(self.topic))
        alarm.add_ok_action(actions.SnsAction(self.topic))
        self.alarms[name] = alarm
        return alarm

    def _api_alarms(self, api: apigw.RestApi) -> None:
        self._alarm(
            "Api5xx",
            api.metric_server_error(period=PERIOD, statistic="Sum"),
            API_5XX_THRESHOLD,
            f"{API_5XX_THRESHOLD} or more 5xx answers in 5 minutes",
        )

    def _function_alarms(self, functions: Mapping[str, ServiceFunction]) -> None:
        for name, function in functions.items():
            self._alarm(
                f"{_pascal(name)}Errors",
                function.function.metric_errors(period=PERIOD, statistic="Sum"),
                1,
                f"the {name} function failed (an error it did not answer, or a timeout)",
            )

    def _near_timeout_alarms(self, functions: Mapping[str, ServiceFunction]) -> None:
        for name, function in functions.items():
            timeout = function.function.timeout
            if timeout is None:  # every ServiceFunction sets one (infra/constructs/compute.py, TIMEOUTS)
                continue
            near_ms = timeout.to_milliseconds() * NEAR_TIMEOUT_SHARE
            self._alarm(
                f"{_pascal(name)}NearTimeout",
                function.function.metric_duration(period=PERIOD, statistic="Maximum"),
                near_ms,
                f"an invocation of the {name} function took {NEAR_TIMEOUT_SHARE:.0%} of its "
                f"{timeout.to_seconds():.0f} s timeout or more ({near_ms:.0f} ms)",
            )

    def _bedrock_models(self) -> dict[str, tuple[str, str]]:
        """Alarm name -> the Bedrock model id the stage's functions call (Bedrock's metrics name the id
        a call gave: the inference profile's, for a derivation model called through one), and what a
        throttle costs."""
        models = {}
        if self._config.search.enabled:  # without a search domain nothing embeds
            models["EmbeddingModelThrottles"] = (
                self._config.embeddings.model_id, "writes are embedded late, by the indexer; recalls degraded")
        derivation = self._config.derivation
        if derivation.provider == "bedrock":
            models["DerivationModelThrottles"] = (derivation.model_id, "derive and consolidate steps retry or fail")
        return models

    @staticmethod
    def _bedrock_throttles(model_id: str) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace="AWS/Bedrock",
            metric_name="InvocationThrottles",
            dimensions_map={"ModelId": model_id},
            period=PERIOD,
            statistic="Sum",
        )

    @staticmethod
    def _account_concurrency() -> cloudwatch.Metric:
        # No dimension: every function of the account in this region, the stage's and any other's.
        return cloudwatch.Metric(
            namespace="AWS/Lambda", metric_name="ConcurrentExecutions", period=PERIOD, statistic="Maximum"
        )

    def _bedrock_alarms(self) -> None:
        for name, (model_id, cost) in self._bedrock_models().items():
            self._alarm(
                name,
                self._bedrock_throttles(model_id),
                BEDROCK_THROTTLES_THRESHOLD,
                f"Bedrock throttled calls to {model_id} in 5 minutes, at the account's quota for it (Service "
                f"Quotas): {cost}",
            )

    def _concurrency_alarm(self) -> None:
        threshold = self._config.alarm_account_concurrency
        self._alarm(
            "AccountConcurrency",
            self._account_concurrency(),
            threshold,
            f"the account's Lambda functions in this region ran {threshold} or more invocations at once "
            "(near the account's concurrency limit: past it every function is throttled)",
        )

    def _service_metric(self, function: ServiceFunction, name: str, statistic: str = "Sum") -> cloudwatch.Metric:
        """A metric a function writes (Powertools Metrics: its service is the dimension)."""
        return cloudwatch.Metric(
            namespace=NAMESPACE,
            metric_name=name,
            dimensions_map={"service": function.service_name},
            period=PERIOD,
            statistic=statistic,
        )

    def _recall_metric(self, functions: Mapping[str, ServiceFunction], name: str) -> cloudwatch.Metric | None:
        """A count the recall function writes."""
        recall = functions.get(RECALL_FUNCTION)
        return self._service_metric(recall, name) if recall is not None else None

    def _throttle_alarms(self, functions: Mapping[str, ServiceFunction], main_table: dynamodb.Table) -> None:
        for name, function in functions.items():
            self._alarm(
                f"{_pascal(name)}Throttles",
                function.function.metric_throttles(period=PERIOD, statistic="Sum"),
                1,
                f"the {name} function was throttled (concurrency limit reached)",
            )
        self._alarm(
            "MainTableThrottles",
            main_table.metric_throttled_requests_for_operations(operations=list(THROTTLE_OPERATIONS), period=PERIOD),
            1,
            "requests to the main table were throttled",
        )

    def _workflow_alarms(self, state_machines: Mapping[str, sfn.StateMachine]) -> None:
        for name, machine in state_machines.items():
            self._alarm(
                f"{_pascal(name)}WorkflowFailed",
                cloudwatch.MathExpression(
                    expression="failed + timedOut + aborted",
                    using_metrics={
                        "failed": machine.metric_failed(period=PERIOD, statistic="Sum"),
                        "timedOut": machine.metric_timed_out(period=PERIOD, statistic="Sum"),
                        "aborted": machine.metric_aborted(period=PERIOD, statistic="Sum"),
                    },
                    period=PERIOD,
                ),
                1,
                f"a {name} workflow execution failed, timed out or was aborted",
            )

    def _indexer_alarms(
        self, functions: Mapping[str, ServiceFunction], stream_dead_letters: Mapping[str, sqs.IQueue]
    ) -> None:
        for name, queue in stream_dead_letters.items():
            self._alarm(
                f"{_pascal(name)}Backlog",
                functions[name].function.metric("IteratorAge", period=PERIOD, statistic="Maximum"),
                INDEXER_MAX_ITERATOR_AGE_MS,
                f"the {name} stream consumer lags the main table by 5 minutes or more",
            )
            self._alarm(
                f"{_pascal(name)}FailedBatches",
                queue.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
                1,
                f"the {name} stream consumer gave up on changes (see its dead-letter queue; run reindex)",
            )

    def _search_alarms(self, search: Search) -> None:
        domain, config = search.domain, self._config.search
        below = cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD
        self._alarm(
            "SearchClusterRed",
            domain.metric_cluster_status_red(period=MINUTE, statistic="Maximum"),
            1,
            "the search domain is red (a primary shard is unassigned)",
        )
        self._alarm(
            "SearchClusterYellow",
            domain.metric_cluster_status_yellow(period=MINUTE, statistic="Maximum"),
            1,
            "the search domain is yellow for 5 minutes (a replica shard is unassigned)",
            periods=5,
        )
        self._alarm(
            "SearchWritesBlocked",
            domain.metric_cluster_index_writes_blocked(period=PERIOD, statistic="Maximum"),
            1,
            "the search domain blocks writes (storage or memory pressure): nothing new is indexed",
        )
        free_mb = config.volume_gb * 1024 * SEARCH_MIN_FREE_STORAGE_SHARE
        self._alarm(
            "SearchFreeStorage",
            domain.metric_free_storage_space(period=MINUTE, statistic="Minimum"),
            free_mb,
            f"a search node has {SEARCH_MIN_FREE_STORAGE_SHARE:.0%} of its volume or less free ({free_mb:.0f} MB)",
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_OR_EQUAL_TO_THRESHOLD,
        )
        nodes = config.instance_count + config.dedicated_master_count
        self._alarm(
            "SearchNodes",
            domain.metric_nodes(period=Duration.days(1), statistic="Minimum"),
            nodes,
            f"the search domain had fewer than its {nodes} nodes for a day",
            comparison=below,
        )
        self._alarm(
            "SearchSnapshotFailed",
            domain.metric_automated_snapshot_failure(period=MINUTE, statistic="Maximum"),
            1,
            "the search domain's automated snapshot failed",
        )
        self._alarm(
            "SearchCpu",
            domain.metric_cpu_utilization(period=PERIOD, statistic="Maximum"),
            SEARCH_MAX_CPU_PERCENT,
            f"search nodes' CPU at {SEARCH_MAX_CPU_PERCENT} % or more for 15 minutes",
            periods=3,
        )
        self._alarm(
            "SearchJvmMemoryPressure",
            domain.metric_jvm_memory_pressure(period=MINUTE, statistic="Maximum"),
            SEARCH_MAX_JVM_MEMORY_PRESSURE_PERCENT,
            f"search nodes' JVM memory pressure at {SEARCH_MAX_JVM_MEMORY_PRESSURE_PERCENT} % or more for 3 minutes",
            periods=3,
        )
        self._alarm(
            "SearchOldGenJvmMemoryPressure",
            domain.metric("OldGenJVMMemoryPressure", period=MINUTE, statistic="Maximum"),
            SEARCH_MAX_OLD_GEN_JVM_MEMORY_PRESSURE_PERCENT,
            f"search nodes' old generation JVM memory pressure at {SEARCH_MAX_OLD_GEN_JVM_MEMORY_PRESSURE_PERCENT} % "
            "or more for 3 minutes",
            periods=3,
        )
        if config.dedicated_master_count:
            self._alarm(
                "SearchMasterCpu",
                domain.metric_master_cpu_utilization(period=PERIOD, statistic="Maximum"),
                SEARCH_MAX_MASTER_CPU_PERCENT,
                f"dedicated masters' CPU at {SEARCH_MAX_MASTER_CPU_PERCENT} % or more for 15 minutes",
                periods=3,
            )
            self._alarm(
                "SearchMasterJvmMemoryPressure",
                domain.metric_master_jvm_memory_pressure(period=MINUTE, statistic="Maximum"),
                SEARCH_MAX_JVM_MEMORY_PRESSURE_PERCENT,
                f"dedicated masters' JVM memory pressure at {SEARCH_MAX_JVM_MEMORY_PRESSURE_PERCENT} % or more "
                "for 3 minutes",
                periods=3,
            )
        if config.instance_type.startswith(BURSTABLE_INSTANCE_PREFIXES):
            self._alarm(
                "SearchCpuCredits",
                domain.metric("CPUCreditBalance", period=PERIOD, statistic="Minimum"),
                1,
                "a burstable search node ran out of CPU credits for 15 minutes (it runs at its baseline: "
                "a larger instance type is due)",
                comparison=below,
                periods=3,
            )
        if search.key is not None:
            for name, metric in (("SearchKmsKeyError", domain.metric_kms_key_error),
                                 ("SearchKmsKeyInaccessible", domain.metric_kms_key_inaccessible)):
                self._alarm(
                    name,
                    metric(period=MINUTE, statistic="Maximum"),
                    1,
                    "the search domain cannot use its customer managed key (disabled, deleted or its grant "
                    "revoked): the domain's data is unreachable",
                )

    def _build_dashboard(
        self,
        api: apigw.RestApi,
        functions: Mapping[str, ServiceFunction],
        main_table: dynamodb.Table,
        state_machines: Mapping[str, sfn.StateMachine],
        search: Search | None,
    ) -> cloudwatch.Dashboard:
        dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=f"uhp-memories-{self._config.name}")
        lambdas = {name: fn.function for name, fn in functions.items()}
        every_alarm = list(self.alarms.values())
        for start in range(0, len(every_alarm), ALARMS_PER_STATUS_WIDGET):
            dashboard.add_widgets(
                cloudwatch.AlarmStatusWidget(
                    title="Alarms", alarms=every_alarm[start:start + ALARMS_PER_STATUS_WIDGET], width=24
                ),
            )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="API requests and errors",
                left=[
                    api.metric_count(period=PERIOD),
                    api.metric_client_error(period=PERIOD),
                    api.metric_server_error(period=PERIOD),
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="API latency (p50, p99)",
                left=[
                    api.metric_latency(period=PERIOD, statistic="p50"),
                    api.metric_latency(period=PERIOD, statistic="p99"),
                ],
                width=12,
            ),
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Lambda errors",
                left=[f.metric_errors(period=PERIOD, label=name) for name, f in lambdas.items()],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Lambda throttles",
                left=[f.metric_throttles(period=PERIOD, label=name) for name, f in lambdas.items()],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Lambda duration p99",
                left=[f.metric_duration(period=PERIOD, statistic="p99", label=name) for name, f in lambdas.items()],
                width=8,
            ),
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Main table consumed capacity",
                left=[
                    main_table.metric_consumed_read_capacity_units(period=PERIOD),
                    main_table.metric_consumed_write_capacity_units(period=PERIOD),
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Workflow executions",
                left=[
                    m
                    for machine in state_machines.values()
                    for m in (machine.metric_succeeded(period=PERIOD), machine.metric_failed(period=PERIOD))
                ],
                width=12,
            ),
        )
        recalls = self._recall_metric(functions, RECALLS)
        if recalls is not None and self.recall_degraded is not None:
            dashboard.add_widgets(
                cloudwatch.GraphWidget(title="Recall answers and degraded ones", left=[recalls, self.recall_degraded],
                                       width=24)
            )
        phased = [(name, functions[name]) for name in PHASE_FUNCTIONS if name in functions]
        if phased:
            dashboard.add_widgets(*[
                cloudwatch.GraphWidget(
                    title=f"{name} request phases, p99 (ms)",
                    left=[
                        self._service_metric(function, metric, "p99").with_(label=phase)
                        for phase, metric in PHASE_METRICS.items()
                    ],
                    width=24 // len(phased),
                )
                for name, function in phased
            ])
        models = [model_id for model_id, _ in self._bedrock_models().values()]
        throttles = [self._bedrock_throttles(model_id).with_(label=model_id) for model_id in models]
        dashboard.add_widgets(
            cloudwatch.GraphWidget(title="Account Lambda concurrency", left=[self._account_concurrency()],
                                   width=12 if throttles else 24),
            *([cloudwatch.GraphWidget(title="Bedrock throttles", left=throttles, width=12)] if throttles else []),
        )
        if search is not None:
            dashboard.add_widgets(
                cloudwatch.GraphWidget(
                    title="Search domain",
                    left=[
                        search.domain.metric_search_latency(period=PERIOD),
                        search.domain.metric_indexing_latency(period=PERIOD),
                    ],
                    right=[search.domain.metric_free_storage_space(period=PERIOD, statistic="Minimum")],
                    width=24,
                )
            )
        return dashboard


def _pascal(name: str) -> str:
    return "".join(part.capitalize() for part in name.replace("-", "_").split("_"))
