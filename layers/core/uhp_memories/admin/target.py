"""Which deployed stage the admin commands act on: read from the stack's CloudFormation outputs, or
named piece by piece."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from uhp_memories import stage_outputs as outputs

# The stage defaults of a tenant's usage plan when the stack does not say (infra/config.py ApiConfig).
DEFAULT_TENANT_RATE = 50.0
DEFAULT_TENANT_BURST = 100
DEFAULT_TENANT_QUOTA_PER_MONTH = 5_000_000


class TargetError(Exception):
    pass


@dataclass(frozen=True)
class StageTarget:
    rest_api_id: str
    stage_name: str
    keys_table: str
    tenant_rate: float = DEFAULT_TENANT_RATE
    tenant_burst: int = DEFAULT_TENANT_BURST
    tenant_quota_per_month: int = DEFAULT_TENANT_QUOTA_PER_MONTH
    main_table: str = ""  # read by `tenants delete` only (whether the tenant still holds memories)

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
        )


def stack_outputs(cloudformation: Any, stack_name: str) -> dict[str, str]:
    """A stack's outputs, by name (uhp_memories.stage_outputs names those of a stage)."""
    try:
        stacks = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    except Exception as error:  # botocore's ClientError for a missing stack, credentials errors...
        raise TargetError(f"cannot read stack {stack_name!r}: {error}") from error
    return {o["OutputKey"]: o["OutputValue"] for o in (stacks[0].get("Outputs") or [])} if stacks else {}
