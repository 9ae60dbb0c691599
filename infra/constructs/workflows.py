"""Step Functions state machines: one per *.asl.json in the workflows folder (Layout.workflows_dir: the
package data of uhp_memories.workflows, the same files local mode runs on moto). No folder, or no
files, means no state machines.

A definition names each task's Lambda as a substitution, `"Resource": "${EraseRecords}"`;
uhp_memories.workflows.STEPS maps the substitution to its step handler, whose Lambda's ARN CDK
substitutes (DefinitionSubstitutions). A substitution that names no step fails the synth. A state
machine may invoke exactly the Lambdas its file names.

A workflow's name is its key in uhp_memories.workflows.WORKFLOWS (else the file's stem); the
functions that start it read its ARN from UHP_<NAME>_STATE_MACHINE_ARN.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.functions import ServiceFunction, log_retention, removal_policy_of
from infra.nag import acknowledge

ASL_SUFFIX = ".asl.json"
SUBSTITUTION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# What a starter does: start a named execution, then poll it until it ends or the request must answer.
START_ACTIONS = ("states:StartExecution",)
WATCH_ACTIONS = ("states:DescribeExecution",)


class UnknownStep(ValueError):
    pass


def definition_files(workflows_dir: Path) -> list[Path]:
    return sorted(workflows_dir.glob(f"*{ASL_SUFFIX}")) if workflows_dir.is_dir() else []


def substitutions_in(path: Path) -> list[str]:
    return sorted(set(SUBSTITUTION.findall(path.read_text())))


def state_machine_env_var(workflow: str) -> str:
    return f"UHP_{re.sub(r'[^A-Z0-9]', '_', workflow.upper())}_STATE_MACHINE_ARN"


def _pascal(name: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", name) if part)


class Workflows(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        workflows_dir: Path,
        steps: Mapping[str, ServiceFunction],
        names: Mapping[str, str],
    ) -> None:
        """steps: substitution -> the step's Lambda; names: ASL file name -> workflow name."""
        super().__init__(scope, construct_id)
        self._config = config
        self.state_machines: dict[str, sfn.StateMachine] = {}
        self.state_machine_names: dict[str, str] = {}
        for path in definition_files(workflows_dir):
            workflow = names.get(path.name, path.name.removesuffix(ASL_SUFFIX))
            self.state_machines[workflow] = self._build_state_machine(workflow, path, steps)

    def _build_state_machine(self, workflow: str, path: Path, steps: Mapping[str, ServiceFunction]) -> sfn.StateMachine:
        used = substitutions_in(path)
        unknown = [name for name in used if name not in steps]
        if unknown:
            raise UnknownStep(
                f"uhp_memories/workflows/{path.name} names {unknown}, which no step handler implements "
                f"(uhp_memories.workflows.STEPS knows {sorted(steps)})"
            )
        scope = Construct(self, _pascal(workflow))
        log_group = logs.LogGroup(
            scope,
            "Logs",
            retention=log_retention(self._config.log_retention_days),
            removal_policy=removal_policy_of(self._config),
        )
        # A fixed name, so a starter can name the executions it polls (execution:NAME:*).
        name = f"uhp-memories-{self._config.name}-{workflow}"
        machine = sfn.StateMachine(
            scope,
            "StateMachine",
            state_machine_name=name,
            # Inline rather than an S3 asset: the definition shows in the template and in `cdk diff`.
            definition_body=sfn.DefinitionBody.from_string(path.read_text()),
            definition_substitutions={sub: steps[sub].function.function_arn for sub in used},
            state_machine_type=sfn.StateMachineType.STANDARD,
            # Every event, never execution data: a state's input and output can carry record content.
            logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=False),
            tracing_enabled=True,
            comment=f"uhp-memories {self._config.name}: uhp_memories/workflows/{path.name}",
        )
        if used:
            machine.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["lambda:InvokeFunction"],
                    resources=sorted({steps[sub].function.function_arn for sub in used}, key=str),
                )
            )
        acknowledge(
            machine,
            "AwsSolutions-IAM5[Resource::*]",
            "CloudWatch Logs delivery (logs:*LogDelivery*, DescribeResourcePolicies, DescribeLogGroups) "
            "and X-Ray (xray:PutTraceSegments, GetSampling*) grant no resource-level permissions; Step "
            "Functions needs them for execution logs and tracing.",
        )
        self.state_machine_names[workflow] = name
        return machine

    def grant_start(self, function: ServiceFunction, workflow: str) -> None:
        """Let a function start one workflow and watch its executions; it reads the ARN from its
        environment."""
        if workflow not in self.state_machines:
            raise UnknownStep(
                f"{function.name} starts workflow {workflow!r}, but uhp_memories/workflows/ defines "
                f"{sorted(self.state_machines) or 'none'}"
            )
        machine = self.state_machines[workflow]
        # Pseudo parameters, not the stack's region: the acknowledgment below names this exact string.
        executions = (
            f"arn:{Aws.PARTITION}:states:{Aws.REGION}:{Aws.ACCOUNT_ID}:execution:{self.state_machine_names[workflow]}:*"
        )
        function.allow(START_ACTIONS, [machine.state_machine_arn])
        function.allow(WATCH_ACTIONS, [executions])
        acknowledge(
            function.role,
            f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:"
            f"{self.state_machine_names[workflow]}:*]",
            "Executions are named by job id at run time; the role may only describe executions of this "
            "one state machine.",
        )
        function.function.add_environment(state_machine_env_var(workflow), machine.state_machine_arn)
