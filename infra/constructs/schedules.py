"""Consolidation schedules (domain/consolidation/schedules.py): the stage's EventBridge Scheduler group, the role
Scheduler invokes the consolidation timer function with (that function only), and what the functions
that set or clear a memory's schedule may do: create, update and delete schedules in this group only,
and pass that one role to Scheduler only."""

from __future__ import annotations

from aws_cdk import Aws, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_scheduler as scheduler
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.functions import ServiceFunction
from infra.nag import acknowledge

SCHEDULE_ACTIONS = ("scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule")
TIMER_FUNCTION = "consolidation_timer"
# The schedules' ARN as cdk-nag names it (pseudo parameters in angle brackets).
NAG_SCHEDULES_ARN = "arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:schedule/{group}/*"


class ConsolidationSchedules(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig, timer: ServiceFunction) -> None:
        super().__init__(scope, construct_id)
        self.group_name = f"uhp-memories-{config.name}"
        self.group = scheduler.CfnScheduleGroup(self, "Group", name=self.group_name)
        self.role = iam.Role(
            self,
            "InvokeTimer",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": Stack.of(self).account}},
            ),
            description=f"uhp-memories {config.name}: EventBridge Scheduler invokes the consolidation timer",
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[timer.function.function_arn])
        )
        self.timer = timer
        # Pseudo parameters, never the stack's account and region: the CLI knows the region without
        # credentials (us-east-1 by default) but not the account, so Stack.format_arn renders a half
        # literal ARN that differs by machine, and the acknowledgment below must name one exact string.
        self.schedules_arn = (
            f"arn:{Aws.PARTITION}:scheduler:{Aws.REGION}:{Aws.ACCOUNT_ID}:schedule/{self.group_name}/*"
        )

    @property
    def environment(self) -> dict[str, str]:
        return {
            "UHP_SCHEDULE_GROUP": self.group_name,
            "UHP_SCHEDULE_TARGET_ARN": self.timer.function.function_arn,
            "UHP_SCHEDULE_ROLE_ARN": self.role.role_arn,
        }

    def grant_manage(self, function: ServiceFunction) -> None:
        """Set and clear memories' schedules: in this group, with this role. The timer function itself only
        clears (a schedule whose memory is gone): it needs neither its own ARN nor the role."""
        if function is self.timer:
            function.function.add_environment("UHP_SCHEDULE_GROUP", self.group_name)
            function.allow(("scheduler:DeleteSchedule",), [self.schedules_arn])
            self._acknowledge(function)
            return
        for name, value in self.environment.items():
            function.function.add_environment(name, value)
        function.allow(SCHEDULE_ACTIONS, [self.schedules_arn])
        self._acknowledge(function)
        function.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[self.role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
            )
        )

    def _acknowledge(self, function: ServiceFunction) -> None:
        acknowledge(
            function.role,
            f"AwsSolutions-IAM5[Resource::{NAG_SCHEDULES_ARN.format(group=self.group_name)}]",
            "One schedule per memory, named at run time from the tenant and the memory; the role reaches the "
            "schedules of this stage's group only.",
        )
