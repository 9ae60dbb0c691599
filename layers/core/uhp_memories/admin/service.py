"""Tenants and API keys of a deployed stage.

A tenant is an API Gateway usage plan on the stage (its throttle and monthly quota). A key is three
things made together: an API Gateway API key in the tenant's usage plan (so the plan applies to it:
the authorizer names it as usageIdentifierKey), and an item in the keys table that the authorizer
reads, written and read by the keys adapter (uhp_memories.adapters.dynamodb.apikeys), as local mode
writes its keys. The key itself is shown once and stored nowhere but in API Gateway, which needs it
to match usageIdentifierKey.

Deleting a tenant takes away every way in: its keys are revoked (items and API Gateway keys) and its
usage plan removed. It never deletes memories: while the tenant holds any, it is refused, saying to
delete them first through the API (the memory-delete workflow, which purges records, files, the
search index and grants as it does for any caller). What holds no content stays: the tenant's
registered types and harness lists, which are its again if a tenant of that name is created later.
"""

from __future__ import annotations

import contextlib
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from uhp_memories.adapters.dynamodb import keys as table_keys
from uhp_memories.adapters.dynamodb.apikeys import ApiKey, DynamoKeyRepository, hash_key, new_key_id
from uhp_memories.adapters.dynamodb.schema import CHILDREN_INDEX
from uhp_memories.adapters.dynamodb.table import DynamoTable
from uhp_memories.admin.target import StageTarget, TargetError

TENANT_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
PRINCIPAL_PATTERN = re.compile(r"^(user|harness|service|key):[A-Za-z0-9._@+-]{1,128}$")
GROUP_PATTERN = re.compile(r"^group:[A-Za-z0-9._@+-]{1,128}$")
TENANT_TAG = "uhp:tenant"
KEY_ID_TAG = "uhp:key_id"


class AdminError(Exception):
    """A refusal the operator can act on (bad name, unknown tenant, unknown key)."""


@dataclass(frozen=True)
class Tenant:
    name: str
    usage_plan_id: str
    rate: float
    burst: int
    quota_per_month: int
    created: bool


@dataclass(frozen=True)
class DeletedTenant:
    name: str
    usage_plan_id: str
    revoked_key_ids: tuple[str, ...]


@dataclass(frozen=True)
class KeyInfo:
    key_id: str
    tenant: str
    principal: str
    groups: tuple[str, ...] = ()
    created_at: str = ""
    revoked: bool = False
    revoked_at: str = ""
    api_key_id: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "key_id": self.key_id,
            "tenant": self.tenant,
            "principal": self.principal,
            "groups": list(self.groups),
            "created_at": self.created_at,
            "revoked": self.revoked,
            "revoked_at": self.revoked_at or None,
        }


@dataclass(frozen=True)
class NewKey:
    key: str = field(repr=False)  # shown once, never logged
    info: KeyInfo


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _check(pattern: re.Pattern[str], value: str, what: str) -> str:
    if not pattern.match(value):
        raise AdminError(f"{what} {value!r} is not valid (expected {pattern.pattern})")
    return value


def new_key() -> str:
    """A new API key: what `keys create` shows once, on a deployed stage and a local data dir alike."""
    return "uhp_" + secrets.token_urlsafe(32)


def check_key_names(tenant: str, principal: str | None, groups: Sequence[str]) -> None:
    """The names a key is made with, as `keys create` and a keys file check them (AdminError otherwise)."""
    _check(TENANT_PATTERN, tenant, "tenant")
    if principal is not None:
        _check(PRINCIPAL_PATTERN, principal, "principal")
    for group in groups:
        _check(GROUP_PATTERN, group, "group")


def key_info(key: ApiKey, **changes: Any) -> KeyInfo:
    info = KeyInfo(
        key_id=key.key_id,
        tenant=key.tenant,
        principal=key.principal,
        groups=key.groups,
        created_at=key.created_at,
        revoked=key.revoked,
        revoked_at=key.revoked_at,
        api_key_id=key.api_key_id,
    )
    return replace(info, **changes)


class StageAdmin:
    def __init__(self, apigateway: Any, dynamodb: Any, target: StageTarget) -> None:
        self._apigw = apigateway
        self._dynamodb = dynamodb
        self._keys = DynamoKeyRepository(dynamodb, target.keys_table)
        self._target = target

    @property
    def target(self) -> StageTarget:
        return self._target

    @property
    def region(self) -> str:
        """The region the commands reach the stage in (the URL of a stage named by id carries it)."""
        return str(self._apigw.meta.region_name)

    # -- tenants -----------------------------------------------------------------------------

    def usage_plan_name(self, tenant: str) -> str:
        return f"uhp-memories-{self._target.rest_api_id}-{self._target.stage_name}-{tenant}"

    def find_tenant(self, tenant: str) -> dict[str, Any] | None:
        name = self.usage_plan_name(tenant)
        for page in self._apigw.get_paginator("get_usage_plans").paginate():
            for plan in page.get("items", []):
                if plan.get("name") == name:
                    return dict(plan)
        return None

    def create_tenant(
        self, tenant: str, rate: float | None = None, burst: int | None = None, quota_per_month: int | None = None
    ) -> Tenant:
        """The tenant's usage plan on this stage; an existing one is left as it is."""
        _check(TENANT_PATTERN, tenant, "tenant")
        existing = self.find_tenant(tenant)
        if existing is not None:
            return self._tenant(tenant, existing, created=False)
        target = self._target
        plan = self._apigw.create_usage_plan(
            name=self.usage_plan_name(tenant),
            description=f"uhp-memories tenant {tenant}",
            apiStages=[{"apiId": target.rest_api_id, "stage": target.stage_name}],
            throttle={"rateLimit": rate or target.tenant_rate, "burstLimit": burst or target.tenant_burst},
            quota={"limit": quota_per_month or target.tenant_quota_per_month, "period": "MONTH"},
            tags={TENANT_TAG: tenant},
        )
        return self._tenant(tenant, plan, created=True)

    def list_tenants(self) -> list[Tenant]:
        """The tenants of this stage (its usage plans named for it), by name."""
        prefix = self.usage_plan_name("")
        found = [
            self._tenant(plan["name"].removeprefix(prefix), plan, created=False)
            for page in self._apigw.get_paginator("get_usage_plans").paginate()
            for plan in page.get("items", [])
            if plan.get("name", "").startswith(prefix)
        ]
        return sorted(found, key=lambda t: t.name)

    def delete_tenant(self, tenant: str) -> DeletedTenant:
        """Revoke every key of the tenant and remove its usage plan; refused while it holds memories
        (nothing of a memory is deleted here: see the module's docstring)."""
        _check(TENANT_PATTERN, tenant, "tenant")
        plan = self.find_tenant(tenant)
        if plan is None:
            raise AdminError(f"no tenant {tenant!r} on this stage (`uhp-memories tenants list` names them)")
        if self._holds_memories(tenant):
            raise AdminError(
                f"tenant {tenant!r} still holds memories: delete them first (DELETE /v1/memories/{{id}} on each "
                "top-level memory, with a key of the tenant that holds delete on it), then run this again; "
                "deleting a tenant never deletes its memories"
            )
        revoked = sorted({key.key_id for _, key in self._keys.scan(tenant) if not key.revoked})
        for key_id in revoked:
            self.revoke_key(key_id)
        target = self._target
        # A plan is removed from its stage before it can be deleted (API Gateway refuses otherwise).
        self._apigw.update_usage_plan(
            usagePlanId=plan["id"],
            patchOperations=[
                {"op": "remove", "path": "/apiStages", "value": f"{target.rest_api_id}:{target.stage_name}"}
            ],
        )
        self._apigw.delete_usage_plan(usagePlanId=plan["id"])
        return DeletedTenant(tenant, plan["id"], tuple(revoked))

    def _holds_memories(self, tenant: str) -> bool:
        """Whether the tenant has a memory: every memory is under a top-level one, listed by the
        children index under the tenant's root (one item read, whatever the table holds)."""
        if not self._target.main_table:
            raise TargetError(
                "deleting a tenant reads the main table: name the stage with --stack, or add --main-table"
            )
        roots = DynamoTable(self._dynamodb, self._target.main_table).query(
            "GSI1PK = :pk", {":pk": table_keys.children_pk(tenant, None)}, index=CHILDREN_INDEX.name, page_size=1
        )
        return next(roots, None) is not None

    def _tenant(self, tenant: str, plan: dict[str, Any], created: bool) -> Tenant:
        throttle, quota = plan.get("throttle") or {}, plan.get("quota") or {}
        return Tenant(
            tenant,
            plan["id"],
            float(throttle.get("rateLimit", 0)),
            int(throttle.get("burstLimit", 0)),
            int(quota.get("limit", 0)),
            created,
        )

    # -- keys --------------------------------------------------------------------------------

    def create_key(self, tenant: str, principal: str | None = None, groups: Sequence[str] = ()) -> NewKey:
        check_key_names(tenant, principal, groups)
        plan = self.find_tenant(tenant)
        if plan is None:
            raise AdminError(f"no tenant {tenant!r} on this stage: run `uhp-memories tenants create {tenant}` first")
        key_id = new_key_id()
        principal = principal or f"key:{key_id}"
        key = new_key()
        api_key = self._apigw.create_api_key(
            name=key_id,
            description=f"uhp-memories tenant {tenant}, principal {principal}",
            enabled=True,
            value=key,
            tags={TENANT_TAG: tenant, KEY_ID_TAG: key_id},
        )
        info = KeyInfo(key_id, tenant, principal, tuple(groups), now(), api_key_id=api_key["id"])
        try:
            self._apigw.create_usage_plan_key(usagePlanId=plan["id"], keyId=api_key["id"], keyType="API_KEY")
            # Last: the item is what makes the key usable, so a failure before it leaves nothing usable.
            self._keys.put(
                hash_key(key), key_id, tenant, principal, groups, created_at=info.created_at, api_key_id=api_key["id"]
            )
        except Exception:
            self._apigw.delete_api_key(apiKey=api_key["id"])
            raise
        return NewKey(key, info)

    def list_keys(self, tenant: str | None = None) -> list[KeyInfo]:
        """Every key of the stage (or of one tenant), oldest first. An operator's scan of a small table."""
        keys = [key_info(key) for _, key in self._keys.scan(tenant)]
        return sorted(keys, key=lambda k: (k.created_at, k.key_id))

    def revoke_key(self, key_id: str) -> KeyInfo:
        """Mark the key revoked (the authorizer refuses it once its cached answer expires) and delete
        its API Gateway key (which refuses it at once)."""
        found = self._keys.with_id(key_id)
        if not found:
            raise AdminError(f"no key {key_id!r} on this stage")
        revoked_at = now()
        for key_hash, key in found:
            self._keys.revoke(key_hash, revoked_at)
            if key.api_key_id:
                # Already gone when revoking twice: that is fine.
                with contextlib.suppress(self._apigw.exceptions.NotFoundException):
                    self._apigw.delete_api_key(apiKey=key.api_key_id)
        key = found[0][1]
        return key_info(key, revoked=True, revoked_at=key.revoked_at or revoked_at)
