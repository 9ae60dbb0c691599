"""`uhp-memories migrate` (issue 37): items written by an earlier release (no `schema`, memory items that
count no children) are brought to this release's schema, idempotently; a dry run changes nothing; a count
made while a child changed is made again (the parent's epoch); and a data dir is migrated with its server
stopped."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Client, ClientFactory
from tests.integration.serve_process import CLI, ROOT
from tests.integration.test_child_counts import counts_agree
from uhp_memories.adapters.dynamodb import keys, migrate
from uhp_memories.adapters.dynamodb.items import CHILDREN_EPOCH, CHILDREN_OPEN, SCHEMA, SCHEMA_VERSION
from uhp_memories.adapters.dynamodb.migrate import Migration
from uhp_memories.adapters.dynamodb.table import DynamoTable

pytestmark = pytest.mark.slow


def table(local_aws: Any) -> DynamoTable:
    return DynamoTable(local_aws.container.dynamodb, local_aws.settings.table_name)


def as_first_release_wrote_it(local_aws: Any, tenant: str, memory_id: str) -> None:
    """The memory item as a release before children were counted left it: no count, no schema."""
    item = table(local_aws).get(keys.memory_pk(tenant, memory_id), keys.META_SK)
    assert item is not None
    gone = [name for name in item if name in (CHILDREN_OPEN, SCHEMA, CHILDREN_EPOCH) or name.startswith("rc_")]
    local_aws.container.dynamodb.update_item(
        TableName=local_aws.settings.table_name, Key={"PK": {"S": item["PK"]}, "SK": {"S": item["SK"]}},
        UpdateExpression="REMOVE " + ", ".join(f"#a{n}" for n in range(len(gone))),
        ExpressionAttributeNames={f"#a{n}": name for n, name in enumerate(gone)},
    )


def item_of(local_aws: Any, tenant: str, memory_id: str) -> dict[str, Any]:
    found = table(local_aws).get(keys.memory_pk(tenant, memory_id), keys.META_SK)
    assert found is not None
    return found


def test_old_memory_items_are_counted_stamped_and_a_second_run_changes_nothing(
    alice: Client, make_client: ClientFactory, local_aws: Any
) -> None:
    bob = make_client("user:bob")
    root = alice.create_memory("Root")["id"]
    alice.grant(root, "user:bob", "read")
    opened = alice.create_memory("Open", parent_id=root)["id"]
    secret = alice.create_memory("Secret", parent_id=root, restricted=True)["id"]
    alice.grant(secret, "user:bob", "read")
    alice.create_memory("Below", parent_id=opened)
    for memory in (root, opened):
        as_first_release_wrote_it(local_aws, alice.tenant, memory)
    late = alice.create_memory("Late", parent_id=root, restricted=True)["id"]  # while the root counts nothing
    assert item_of(local_aws, alice.tenant, root)[CHILDREN_EPOCH] == 1  # the change it will be counted after
    assert (counts_agree(alice, root), counts_agree(bob, root)) == (3, 2)  # read, as a first-release item is

    dry = Migration(table(local_aws), settle_s=0).run(dry_run=True)
    assert dry.counted >= 2
    assert CHILDREN_OPEN not in item_of(local_aws, alice.tenant, root)  # a dry run writes nothing

    done = Migration(table(local_aws), settle_s=0).run()
    assert done.counted == dry.counted
    assert done.busy == []
    counted = item_of(local_aws, alice.tenant, root)
    assert (counted[CHILDREN_OPEN], counted[SCHEMA]) == (1, SCHEMA_VERSION)
    assert counted[f"rc_{secret}"].split() == sorted(["user:alice", "user:bob"])
    assert counted[f"rc_{late}"] == "user:alice"
    assert (counts_agree(alice, root), counts_agree(bob, root)) == (3, 2)  # now from the count kept

    again = Migration(table(local_aws), settle_s=0).run()
    assert (again.counted, again.stamped) == (0, 0)
    assert again.seen >= done.seen


def test_a_count_made_while_a_child_came_is_made_again(
    alice: Client, local_aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = alice.create_memory("Busy root")["id"]
    alice.create_memory("First", parent_id=root)
    as_first_release_wrote_it(local_aws, alice.tenant, root)
    came: list[str] = []
    real_query = DynamoTable.query

    def a_child_comes_while_the_index_settles(seconds: float) -> None:
        if not came:
            came.append(alice.create_memory("Meanwhile", parent_id=root)["id"])

    def the_index_not_caught_up_the_first_time(self: DynamoTable, *args: Any, **kwargs: Any) -> Any:
        found = list(real_query(self, *args, **kwargs))
        if kwargs.get("index") and came and len(came) == 1:  # the children index lags the new child once
            came.append("read")
            return iter([item for item in found if item.get("id") != came[0]])
        return iter(found)

    monkeypatch.setattr(migrate.time, "sleep", a_child_comes_while_the_index_settles)
    monkeypatch.setattr(DynamoTable, "query", the_index_not_caught_up_the_first_time)
    Migration(table(local_aws), settle_s=0).run()
    assert came[1:] == ["read"]  # the first count missed the child; its epoch had moved: counted again
    assert item_of(local_aws, alice.tenant, root)[CHILDREN_OPEN] == 2
    assert counts_agree(alice, root) == 2


WRITE_A_FIRST_RELEASE_DATA_DIR = textwrap.dedent(
    """
    import json, sys
    from uhp_memories.domain.model import Caller
    from uhp_memories.local.data_dir import DataDir
    from uhp_memories.local.moto_env import LocalAws
    from uhp_memories.settings import Settings

    local = LocalAws(Settings(), data_dir=DataDir(sys.argv[1]).open()).start()
    alice = Caller("acme", "user:alice")
    root = local.container.memories.create(alice, name="Root").memory.id
    local.container.memories.create(alice, name="Child", parent_id=root)
    item = {"PK": {"S": f"T#acme#M#{root}"}, "SK": {"S": "META"}}
    local.container.dynamodb.update_item(TableName=local.settings.table_name, Key=item,
                                         UpdateExpression="REMOVE children_open, #s",
                                         ExpressionAttributeNames={"#s": "schema"})
    local.stop()
    local.data_dir.close(clean=True)
    print(json.dumps({"root": root}))
    """
)


def test_a_data_dir_is_migrated_by_the_command_with_its_server_stopped(tmp_path: Path) -> None:
    written = subprocess.run([sys.executable, "-c", WRITE_A_FIRST_RELEASE_DATA_DIR, str(tmp_path)],
                             capture_output=True, text=True, cwd=ROOT, timeout=180)
    assert written.returncode == 0, written.stderr[-2000:]

    def migrate_it(*more: str) -> dict[str, Any]:
        ran = subprocess.run([str(CLI), "migrate", "--data-dir", str(tmp_path), "--json", *more],
                             capture_output=True, text=True, cwd=ROOT, timeout=180)
        assert ran.returncode == 0, ran.stderr[-2000:]
        return dict(json.loads(ran.stdout))

    dry = migrate_it("--dry-run")
    assert dry["counted"] == 1  # the root's item, which lost its count and its stamp
    done = migrate_it()
    assert (done["counted"], done["busy"], done["schema"]) == (1, [], SCHEMA_VERSION)
    assert (migrate_it()["counted"], migrate_it()["stamped"]) == (0, 0)
