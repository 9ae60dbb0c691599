"""Which deployed stage the admin commands act on: read from the stack's CloudFormation outputs, or
named piece by piece."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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

    @classmethod
    def from_stack(cls, cloudformation: Any, stack_name: str) -> StageTarget:
        """The stage a `cdk deploy` made, from the outputs of its stack (infra/stacks/memory_service.py)."""
        try:
            stacks = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
        except Exception as error:  # botocore's ClientError for a missing stack, credentials errors...
            raise TargetError(f"cannot read stack {stack_name!r}: {error}") from error
        outputs = {o["OutputKey"]: o["OutputValue"] for o in (stacks[0].get("Outputs") or [])} if stacks else {}
        missing = [k for k in ("RestApiId", "ApiStageName", "KeysTableName") if k not in outputs]
        if missing:
            raise TargetError(f"stack {stack_name!r} has no output {', '.join(missing)}: is it a uhp-memories stack?")
        return cls(
            rest_api_id=outputs["RestApiId"],
            stage_name=outputs["ApiStageName"],
            keys_table=outputs["KeysTableName"],
            tenant_rate=float(outputs.get("TenantRateLimit", DEFAULT_TENANT_RATE)),
            tenant_burst=int(float(outputs.get("TenantBurstLimit", DEFAULT_TENANT_BURST))),
            tenant_quota_per_month=int(float(outputs.get("TenantQuotaPerMonth", DEFAULT_TENANT_QUOTA_PER_MONTH))),
        )
