"""Which deployed stage the admin commands act on: read from the stack's CloudFormation outputs, or
named piece by piece."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from uhp_memories import stage_outputs as outputs

# The stage defaults of a tenant's usage plan when the stack does not say (infra/config.py ApiConfig).
DEFAULT_TENANT_RATE = 50.0
DEFAULT_TENANT_BURST = 100
DEFAULT_TENANT_QUOTA_PER_MONTH = 5_000_000


class TargetError(Exception):
    pass


def aws_session(profile: str | None, region: str | None) -> Any:
    """The admin commands' AWS session. boto3 reads only AWS_DEFAULT_REGION, while docs/deploy.md, the AWS
    CLI v2 and every other AWS SDK say AWS_REGION: --region first, then AWS_REGION, then
    AWS_DEFAULT_REGION, then the profile's region."""
    import boto3

    chosen = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None
    return boto3.Session(profile_name=profile, region_name=chosen)


def aws_refusal(error: Exception) -> str | None:
    """The one line an operator is told for an AWS client error (no region, no credentials, a refusal),
    or None for an error that is not AWS's: never a traceback."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

    if isinstance(error, NoRegionError):
        return "no AWS region: add --region NAME, or set AWS_REGION (or a region in your AWS profile)"
    if isinstance(error, NoCredentialsError):
        return "no AWS credentials: add --profile NAME, or set them as for the AWS CLI (aws configure)"
    if isinstance(error, (BotoCoreError, ClientError)):
        return f"AWS refused: {error}"
    return None


@dataclass(frozen=True)
class StageTarget:
    rest_api_id: str
    stage_name: str
    keys_table: str
    tenant_rate: float = DEFAULT_TENANT_RATE
    tenant_burst: int = DEFAULT_TENANT_BURST
    tenant_quota_per_month: int = DEFAULT_TENANT_QUOTA_PER_MONTH
    main_table: str = ""  # read by `tenants delete` only (whether the tenant still holds memories)
    api_url: str = ""  # the stage's invoke URL (`bootstrap` prints it): the stack's ApiUrl output

    @classmethod
    def from_stack(cls, cloudformation: Any, stack_name: str) -> StageTarget:
        """The stage a `cdk deploy` made, from the outputs of its stack (uhp_memories.stage_outputs)."""
        found = stack_outputs(cloudformation, stack_name)
        missing = [name for name in outputs.ADMIN_REQUIRED if name not in found]
        if missing:
            raise TargetError(f"stack {stack_name!r} has no output {', '.join(missing)}: is it a uhp-memories stack?")
        return cls(
            rest_api_id=found[outputs.REST_API_ID],
            stage_name=found[outputs.API_STAGE_NAME],
            keys_table=found[outputs.KEYS_TABLE_NAME],
            tenant_rate=float(found.get(outputs.TENANT_RATE_LIMIT, DEFAULT_TENANT_RATE)),
            tenant_burst=int(float(found.get(outputs.TENANT_BURST_LIMIT, DEFAULT_TENANT_BURST))),
            tenant_quota_per_month=int(
                float(found.get(outputs.TENANT_QUOTA_PER_MONTH, DEFAULT_TENANT_QUOTA_PER_MONTH))
            ),
            main_table=found.get(outputs.MAIN_TABLE_NAME, ""),
            api_url=found.get(outputs.API_URL, ""),
        )

    def invoke_url(self, region: str) -> str:
        """The stage's URL: the stack's own output, or API Gateway's form for a REST API named by id."""
        return self.api_url.rstrip("/") or f"https://{self.rest_api_id}.execute-api.{region}.amazonaws.com/{self.stage_name}"


def stack_outputs(cloudformation: Any, stack_name: str) -> dict[str, str]:
    """A stack's outputs, by name (uhp_memories.stage_outputs names those of a stage)."""
    try:
        stacks = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    except Exception as error:  # botocore's ClientError for a missing stack, credentials errors...
        raise TargetError(f"cannot read stack {stack_name!r}: {error}") from error
    return {o["OutputKey"]: o["OutputValue"] for o in (stacks[0].get("Outputs") or [])} if stacks else {}
