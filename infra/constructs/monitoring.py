"""Alarms and one dashboard.

Alarms: API 5xx; throttles (each function's Lambda throttles, the main table's throttled requests);
failed workflow executions; indexer backlog (stream iterator age and failed batches of every stream
consumer); the search domain's red status and free storage. Each alarm notifies one SNS topic,
subscribed by the stage's `alarm_email` when set.
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

PERIOD = Duration.minutes(5)
API_5XX_THRESHOLD = 5  # server errors in 5 minutes
INDEXER_MAX_ITERATOR_AGE_MS = 5 * 60 * 1000  # the index lags DynamoDB by more than 5 minutes
SEARCH_MIN_FREE_STORAGE_MB = 2048
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
        self._throttle_alarms(functions, main_table)
        self._workflow_alarms(state_machines)
        self._indexer_alarms(functions, stream_dead_letters)
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
    ) -> cloudwatch.Alarm:
        alarm = cloudwatch.Alarm(
            self,
            name,
            metric=metric,
            threshold=threshold,
            evaluation_periods=1,
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
        self._alarm(
            "SearchClusterRed",
            search.domain.metric_cluster_status_red(period=Duration.minutes(1), statistic="Maximum"),
            1,
            "the search domain is red (a primary shard is unassigned)",
        )
        self._alarm(
            "SearchFreeStorage",
            search.domain.metric_free_storage_space(period=PERIOD, statistic="Minimum"),
            SEARCH_MIN_FREE_STORAGE_MB,
            f"a search node has less than {SEARCH_MIN_FREE_STORAGE_MB} MB free",
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_OR_EQUAL_TO_THRESHOLD,
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
        dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=list(self.alarms.values()), width=24),
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
