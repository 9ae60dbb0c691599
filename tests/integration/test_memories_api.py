"""§2 through the local gateway: the memory object, create, get, update and move, delete, listings.

Every assertion names an exact status, an exact error code and the exact fields the spec fixes."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest
import requests

from tests.integration.conftest import Client, ClientFactory, error_code
from uhp_memories.domain.limits import MAX_TREE_DEPTH
from uhp_memories.local.moto_env import LocalAws

MEMORY_ID = re.compile(r"^hmem_[0-9a-f]{32}$")
ALL_PRIVILEGES = ["read", "write", "create", "delete"]
MEMORY_FIELDS = {
    "id", "object", "name", "description", "parent_id", "ancestors", "restricted", "provider",
    "privileges", "records", "children", "createdAt", "updatedAt",
}


# -- helpers -----------------------------------------------------------------------------------


def raw(client: Client, method: str, path: str, data: bytes | str,
        content_type: str = "application/json") -> requests.Response:
    """A request with a body sent as given, byte for byte (to send what `json=` never would)."""
    return client.session.request(
        method, client.base_url + path, data=data,
        headers={"x-api-key": client.key, "content-type": content_type}, timeout=30,
    )


def get_memory(client: Client, memory_id: str) -> dict[str, Any]:
    answer = client.get(f"/v1/memories/{memory_id}")
    assert answer.status_code == 200, answer.text
    return answer.json()


def assert_not_found(answer: requests.Response, code: str = "memory_not_found") -> None:
    assert answer.status_code == 404, answer.text
    assert error_code(answer) == code


def assert_invalid(answer: requests.Response) -> None:
    assert answer.status_code == 422, answer.text
    assert error_code(answer) == "memory_invalid"
    assert answer.json()["error"]["message"]


def list_all(client: Client, **query: Any) -> list[dict[str, Any]]:
    """Every page of GET /v1/memories with `query`, following next_cursor to the end."""
    found: list[dict[str, Any]] = []
    cursor = None
    for _ in range(100):
        answer = client.get("/v1/memories", cursor=cursor, **query)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["object"] == "list"
        found.extend(body["data"])
        cursor = body["next_cursor"]
        if cursor is None:
            return found
    raise AssertionError("the listing never ended")


def listed_ids(client: Client, **query: Any) -> list[str]:
    return [m["id"] for m in list_all(client, **query)]


def tenant_items(local_aws: LocalAws, tenant: str, memory_id: str) -> list[dict[str, Any]]:
    """Every item of the main table kept under one memory's partition, or naming it (except the job
    that reports the memory's own removal)."""
    assert local_aws.container is not None
    client = local_aws.container.dynamodb
    table = local_aws.container.settings.table_name
    found: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {
        "TableName": table,
        "FilterExpression": "(begins_with(PK, :pk) OR contains(GSI1PK, :mid) OR memory_id = :mid)"
        " AND (attribute_not_exists(entity) OR entity <> :job)",
        "ExpressionAttributeValues": {
            ":pk": {"S": f"T#{tenant}#M#{memory_id}"}, ":mid": {"S": memory_id}, ":job": {"S": "job"},
        },
    }
    while True:
        page = client.scan(**kwargs)
        found.extend(page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            return found
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


# -- create ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_create_root_answers_the_whole_memory_object(alice: Client) -> None:
    answer = alice.post("/v1/memories", {"name": "Sales", "description": "What the sales team knows."})
    assert answer.status_code == 201, answer.text
    memory = answer.json()
    assert set(memory) == MEMORY_FIELDS
    assert MEMORY_ID.match(memory["id"])
    assert memory["object"] == "memory"
    assert memory["name"] == "Sales"
    assert memory["description"] == "What the sales team knows."
    assert memory["parent_id"] is None
    assert memory["ancestors"] == []
    assert memory["restricted"] is False
    assert memory["provider"] == "native"
    assert memory["privileges"] == ALL_PRIVILEGES
    assert memory["records"] == {"count": 0}
    assert memory["children"] == {"count": 0}
    # epoch milliseconds, not seconds
    assert isinstance(memory["createdAt"], int)
    assert 1_600_000_000_000 < memory["createdAt"] < 10_000_000_000_000
    assert memory["updatedAt"] == memory["createdAt"]


@pytest.mark.slow
def test_create_defaults_and_explicit_fields(alice: Client) -> None:
    bare = alice.create_memory("bare")
    assert bare["description"] == ""
    assert bare["restricted"] is False
    assert bare["provider"] == "native"

    private = alice.create_memory("mine", restricted=True, provider="native", parent_id=None)
    assert private["restricted"] is True
    assert private["parent_id"] is None
    assert get_memory(alice, private["id"])["restricted"] is True


@pytest.mark.slow
def test_create_child_is_placed_under_its_parent(alice: Client) -> None:
    root = alice.create_memory("Company")
    child = alice.create_memory("Sales", parent_id=root["id"])
    grandchild = alice.create_memory("Acme", parent_id=child["id"])

    assert child["parent_id"] == root["id"]
    assert child["ancestors"] == [root["id"]]
    assert grandchild["parent_id"] == child["id"]
    assert grandchild["ancestors"] == [root["id"], child["id"]]
    assert grandchild["privileges"] == ALL_PRIVILEGES
    assert get_memory(alice, root["id"])["children"] == {"count": 1}
    assert get_memory(alice, child["id"])["children"] == {"count": 1}
    assert get_memory(alice, grandchild["id"])["children"] == {"count": 0}


@pytest.mark.slow
def test_provider_is_inherited_from_the_parent(alice: Client) -> None:
    root = alice.create_memory("root", provider="native")
    child = alice.create_memory("child", parent_id=root["id"])
    assert child["provider"] == root["provider"] == "native"


@pytest.mark.slow
def test_unknown_provider_is_refused(alice: Client) -> None:
    answer = alice.post("/v1/memories", {"name": "m", "provider": "mem0-cloud"})
    assert_invalid(answer)
    assert listed_ids(alice) == []

    root = alice.create_memory("root")
    assert_invalid(alice.post("/v1/memories", {"name": "c", "parent_id": root["id"], "provider": "nope"}))
    assert get_memory(alice, root["id"])["children"] == {"count": 0}


@pytest.mark.slow
def test_provider_cannot_change(alice: Client) -> None:
    memory = alice.create_memory("m")
    assert_invalid(alice.put(f"/v1/memories/{memory['id']}", {"provider": "other"}))
    same = alice.put(f"/v1/memories/{memory['id']}", {"provider": "native"})
    assert same.status_code == 200, same.text
    assert same.json()["provider"] == "native"


@pytest.mark.slow
def test_create_under_unknown_parent_is_not_found(alice: Client) -> None:
    assert_not_found(alice.post("/v1/memories", {"name": "c", "parent_id": "hmem_" + "0" * 32}))
    assert_not_found(alice.post("/v1/memories", {"name": "c", "parent_id": "not-an-id"}))
    assert listed_ids(alice) == []


@pytest.mark.parametrize(
    "body",
    [
        {"name": "x" * 201},
        {"name": ""},
        {"name": "ok", "description": "d" * 2001},
        {},
        {"description": "no name"},
        {"name": None},
        {"name": 42},
        {"name": "ok", "restricted": "maybe"},
        {"name": "ok", "parent_id": 7},
        {"name": "ok", "color": "red"},
        {"name": "ok", "privileges": ["read"]},
        {"name": "ok", "id": "hmem_" + "a" * 32},
    ],
    ids=[
        "name-201", "name-empty", "description-2001", "no-name", "only-description", "name-null",
        "name-number", "restricted-string", "parent-number", "unknown-field", "server-field-privileges",
        "server-field-id",
    ],
)
def test_create_refuses_bad_fields(alice: Client, body: dict[str, Any]) -> None:
    assert_invalid(alice.post("/v1/memories", body))
    assert listed_ids(alice) == []


@pytest.mark.slow
def test_create_accepts_names_and_descriptions_at_the_limit(alice: Client) -> None:
    memory = alice.create_memory("n" * 200, description="d" * 2000)
    read = get_memory(alice, memory["id"])
    assert read["name"] == "n" * 200
    assert read["description"] == "d" * 2000


@pytest.mark.slow
def test_unicode_name_round_trips(alice: Client) -> None:
    name = "Ventes — équipe 東京 🚀"
    memory = alice.create_memory(name, description="ça marche")
    assert get_memory(alice, memory["id"])["name"] == name


@pytest.mark.parametrize(
    "body", ["{not json", '{"name": "x",}', "[1, 2", "{'name': 'x'}"], ids=["brace", "trailing", "list", "quotes"]
)
def test_malformed_json_is_invalid_request(alice: Client, body: str) -> None:
    answer = raw(alice, "POST", "/v1/memories", body)
    assert answer.status_code == 400, answer.text
    assert error_code(answer) == "invalid_request"
    assert listed_ids(alice) == []


@pytest.mark.slow
def test_malformed_json_on_update_is_invalid_request(alice: Client) -> None:
    memory = alice.create_memory("m")
    answer = raw(alice, "PUT", f"/v1/memories/{memory['id']}", '{"name": ')
    assert answer.status_code == 400, answer.text
    assert error_code(answer) == "invalid_request"
    assert get_memory(alice, memory["id"])["name"] == "m"


@pytest.mark.slow
@pytest.mark.parametrize(
    "body", ['["name"]', '"Sales"', "42", "null", ""], ids=["list", "string", "number", "null", "empty"]
)
def test_a_body_that_is_not_an_object_is_invalid(alice: Client, body: str) -> None:
    """Well-formed JSON that is not a memory, or no body at all: the fields are invalid or missing."""
    assert_invalid(raw(alice, "POST", "/v1/memories", body))
    memory = alice.create_memory("m")
    assert_invalid(raw(alice, "PUT", f"/v1/memories/{memory['id']}", body))
    assert listed_ids(alice) == [memory["id"]]
    assert get_memory(alice, memory["id"])["name"] == "m"


def test_error_body_shape(alice: Client) -> None:
    answer = alice.get("/v1/memories/hmem_" + "0" * 32)
    assert answer.status_code == 404
    assert answer.headers["content-type"].startswith("application/json")
    body = answer.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == "memory_not_found"
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"]


# -- get ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_get_unknown_memory_is_not_found(alice: Client) -> None:
    assert_not_found(alice.get("/v1/memories/hmem_" + "f" * 32))
    assert_not_found(alice.get("/v1/memories/garbage"))


@pytest.mark.slow
def test_get_counts_records(alice: Client) -> None:
    memory = alice.create_memory("m")
    other = alice.create_memory("other")
    records = [alice.remember(memory["id"], f"fact {i}") for i in range(3)]
    read = get_memory(alice, memory["id"])
    assert read["records"] == {"count": 3}
    assert get_memory(alice, other["id"])["records"] == {"count": 0}

    # A revision replaces a record; it does not add one.
    revised = alice.patch(f"/v1/memories/{memory['id']}/records/{records[0]['id']}", {"content": "fact 0, revised"})
    assert revised.status_code == 200, revised.text
    assert get_memory(alice, memory["id"])["records"] == {"count": 3}

    # A forgotten record leaves the count.
    forgotten = alice.delete(f"/v1/memories/{memory['id']}/records/{records[1]['id']}")
    assert forgotten.status_code == 200, forgotten.text
    assert get_memory(alice, memory["id"])["records"] == {"count": 2}


@pytest.mark.slow
def test_records_count_is_per_memory_not_per_subtree(alice: Client) -> None:
    root = alice.create_memory("root")
    child = alice.create_memory("child", parent_id=root["id"])
    alice.remember(child["id"])
    alice.remember(child["id"])
    assert get_memory(alice, root["id"])["records"] == {"count": 0}
    assert get_memory(alice, child["id"])["records"] == {"count": 2}


@pytest.mark.slow
def test_children_count_counts_direct_children_only(alice: Client) -> None:
    root = alice.create_memory("root")
    a = alice.create_memory("a", parent_id=root["id"])
    alice.create_memory("b", parent_id=root["id"])
    alice.create_memory("a1", parent_id=a["id"])
    alice.create_memory("a2", parent_id=a["id"])
    alice.create_memory("a3", parent_id=a["id"])
    assert get_memory(alice, root["id"])["children"] == {"count": 2}
    assert get_memory(alice, a["id"])["children"] == {"count": 3}


@pytest.mark.slow
def test_get_shows_the_callers_own_privileges(alice: Client, bob: Client) -> None:
    memory = alice.create_memory("m")
    alice.grant(memory["id"], "user:bob", "read", "create")
    assert get_memory(alice, memory["id"])["privileges"] == ALL_PRIVILEGES
    assert get_memory(bob, memory["id"])["privileges"] == ["read", "create"]


# -- update ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_rename_and_describe(alice: Client) -> None:
    memory = alice.create_memory("old", description="old description")
    answer = alice.put(f"/v1/memories/{memory['id']}", {"name": "new"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body) == MEMORY_FIELDS
    assert body["name"] == "new"
    assert body["description"] == "old description"
    assert body["createdAt"] == memory["createdAt"]
    assert body["updatedAt"] >= memory["updatedAt"]

    answer = alice.put(f"/v1/memories/{memory['id']}", {"description": "new description"})
    assert answer.status_code == 200, answer.text
    read = get_memory(alice, memory["id"])
    assert (read["name"], read["description"]) == ("new", "new description")
    assert read["parent_id"] is None
    assert read["restricted"] is False


@pytest.mark.slow
def test_description_can_be_cleared(alice: Client) -> None:
    memory = alice.create_memory("m", description="something")
    answer = alice.put(f"/v1/memories/{memory['id']}", {"description": ""})
    assert answer.status_code == 200, answer.text
    assert get_memory(alice, memory["id"])["description"] == ""


@pytest.mark.slow
def test_empty_update_changes_nothing(alice: Client) -> None:
    root = alice.create_memory("root")
    memory = alice.create_memory("m", description="d", parent_id=root["id"], restricted=True)
    answer = alice.put(f"/v1/memories/{memory['id']}", {})
    assert answer.status_code == 200, answer.text
    read = get_memory(alice, memory["id"])
    for field in ("name", "description", "parent_id", "ancestors", "restricted", "provider"):
        assert read[field] == memory[field], field


@pytest.mark.slow
@pytest.mark.parametrize(
    "body",
    [
        {"name": "x" * 201},
        {"name": ""},
        {"description": "d" * 2001},
        {"name": None},
        {"description": None},
        {"restricted": None},
        {"restricted": [True]},
        {"color": "red"},
        {"privileges": ALL_PRIVILEGES},
        {"parent_id": 12},
    ],
    ids=[
        "name-201", "name-empty", "description-2001", "name-null", "description-null", "restricted-null",
        "restricted-string", "unknown-field", "server-field", "parent-number",
    ],
)
def test_update_refuses_bad_fields(alice: Client, body: dict[str, Any]) -> None:
    memory = alice.create_memory("m", description="d")
    assert_invalid(alice.put(f"/v1/memories/{memory['id']}", body))
    read = get_memory(alice, memory["id"])
    assert (read["name"], read["description"], read["restricted"]) == ("m", "d", False)


def test_update_unknown_memory_is_not_found(alice: Client) -> None:
    assert_not_found(alice.put("/v1/memories/hmem_" + "1" * 32, {"name": "x"}))


@pytest.mark.slow
def test_set_and_clear_restricted(alice: Client) -> None:
    memory = alice.create_memory("m")
    answer = alice.put(f"/v1/memories/{memory['id']}", {"restricted": True})
    assert answer.status_code == 200, answer.text
    assert answer.json()["restricted"] is True
    assert get_memory(alice, memory["id"])["restricted"] is True
    answer = alice.put(f"/v1/memories/{memory['id']}", {"restricted": False})
    assert answer.status_code == 200, answer.text
    assert get_memory(alice, memory["id"])["restricted"] is False


@pytest.mark.slow
def test_move_to_another_parent(alice: Client) -> None:
    a = alice.create_memory("a")
    b = alice.create_memory("b")
    moved = alice.create_memory("moved", parent_id=a["id"])
    below = alice.create_memory("below", parent_id=moved["id"])

    answer = alice.put(f"/v1/memories/{moved['id']}", {"parent_id": b["id"]})
    assert answer.status_code == 200, answer.text
    assert answer.json()["parent_id"] == b["id"]
    assert answer.json()["ancestors"] == [b["id"]]

    assert get_memory(alice, a["id"])["children"] == {"count": 0}
    assert get_memory(alice, b["id"])["children"] == {"count": 1}
    assert listed_ids(alice, parent=a["id"]) == []
    assert listed_ids(alice, parent=b["id"]) == [moved["id"]]
    # The subtree moves with it.
    read_below = get_memory(alice, below["id"])
    assert read_below["parent_id"] == moved["id"]
    assert read_below["ancestors"] == [b["id"], moved["id"]]
    assert listed_ids(alice, ancestor=a["id"]) == []
    assert sorted(listed_ids(alice, ancestor=b["id"])) == sorted([moved["id"], below["id"]])


@pytest.mark.slow
def test_move_combined_with_rename(alice: Client) -> None:
    a = alice.create_memory("a")
    b = alice.create_memory("b")
    moved = alice.create_memory("moved", parent_id=a["id"])
    answer = alice.put(f"/v1/memories/{moved['id']}", {"parent_id": b["id"], "name": "renamed"})
    assert answer.status_code == 200, answer.text
    read = get_memory(alice, moved["id"])
    assert (read["name"], read["parent_id"]) == ("renamed", b["id"])


@pytest.mark.slow
def test_move_to_the_root_with_null_parent(alice: Client) -> None:
    root = alice.create_memory("root")
    child = alice.create_memory("child", parent_id=root["id"])
    answer = alice.put(f"/v1/memories/{child['id']}", {"parent_id": None})
    assert answer.status_code == 200, answer.text
    assert answer.json()["parent_id"] is None
    assert answer.json()["ancestors"] == []
    assert get_memory(alice, root["id"])["children"] == {"count": 0}
    assert sorted(listed_ids(alice)) == sorted([root["id"], child["id"]])


@pytest.mark.slow
def test_a_missing_parent_id_is_not_a_move(alice: Client) -> None:
    root = alice.create_memory("root")
    child = alice.create_memory("child", parent_id=root["id"])
    answer = alice.put(f"/v1/memories/{child['id']}", {"name": "renamed"})
    assert answer.status_code == 200, answer.text
    assert get_memory(alice, child["id"])["parent_id"] == root["id"]


@pytest.mark.slow
def test_move_under_itself_is_invalid(alice: Client) -> None:
    root = alice.create_memory("root")
    memory = alice.create_memory("m", parent_id=root["id"])
    assert_invalid(alice.put(f"/v1/memories/{memory['id']}", {"parent_id": memory["id"]}))
    assert get_memory(alice, memory["id"])["parent_id"] == root["id"]
    lone = alice.create_memory("lone")
    assert_invalid(alice.put(f"/v1/memories/{lone['id']}", {"parent_id": lone["id"]}))
    assert get_memory(alice, lone["id"])["parent_id"] is None


@pytest.mark.slow
def test_move_under_own_descendant_is_invalid(alice: Client) -> None:
    top = alice.create_memory("top")
    middle = alice.create_memory("middle", parent_id=top["id"])
    bottom = alice.create_memory("bottom", parent_id=middle["id"])
    assert_invalid(alice.put(f"/v1/memories/{top['id']}", {"parent_id": bottom["id"]}))
    assert_invalid(alice.put(f"/v1/memories/{top['id']}", {"parent_id": middle["id"]}))
    assert_invalid(alice.put(f"/v1/memories/{middle['id']}", {"parent_id": bottom["id"]}))
    # Nothing moved; a cycle would leave the tree unreachable from its roots.
    assert get_memory(alice, top["id"])["parent_id"] is None
    assert get_memory(alice, middle["id"])["parent_id"] == top["id"]
    assert get_memory(alice, bottom["id"])["ancestors"] == [top["id"], middle["id"]]
    assert listed_ids(alice) == [top["id"]]


@pytest.mark.slow
def test_move_under_unknown_parent_is_not_found(alice: Client) -> None:
    memory = alice.create_memory("m")
    assert_not_found(alice.put(f"/v1/memories/{memory['id']}", {"parent_id": "hmem_" + "2" * 32}))
    assert get_memory(alice, memory["id"])["parent_id"] is None


@pytest.mark.slow
def test_move_that_would_make_the_tree_too_deep_is_refused(alice: Client) -> None:
    """Moving a subtree must respect the depth limit the way creating does, counting the subtree's
    own height: otherwise moves stack trees past the depth the server walks to detect a cycle."""

    def chain(name: str, length: int) -> list[str]:
        ids = [alice.create_memory(f"{name} 1")["id"]]
        for level in range(2, length + 1):
            ids.append(alice.create_memory(f"{name} {level}", parent_id=ids[-1])["id"])
        return ids

    upper = chain("upper", MAX_TREE_DEPTH // 2)
    lower = chain("lower", MAX_TREE_DEPTH - MAX_TREE_DEPTH // 2 + 1)

    # Under upper's last node the lower chain's bottom would sit one level too deep.
    assert_invalid(alice.put(f"/v1/memories/{lower[0]}", {"parent_id": upper[-1]}))
    assert get_memory(alice, lower[0])["parent_id"] is None
    # One level higher it fits exactly.
    answer = alice.put(f"/v1/memories/{lower[0]}", {"parent_id": upper[-2]})
    assert answer.status_code == 200, answer.text
    bottom = get_memory(alice, lower[-1])
    assert len(bottom["ancestors"]) == MAX_TREE_DEPTH - 1
    assert_invalid(alice.post("/v1/memories", {"name": "too deep", "parent_id": lower[-1]}))
    # The top of the tree can never end up under its own bottom.
    assert_invalid(alice.put(f"/v1/memories/{upper[0]}", {"parent_id": lower[-1]}))
    assert get_memory(alice, upper[0])["parent_id"] is None
    assert listed_ids(alice) == [upper[0]]


# -- delete ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_delete_removes_the_subtree_and_its_records(alice: Client, local_aws: LocalAws) -> None:
    keep = alice.create_memory("keep")
    root = alice.create_memory("root")
    child = alice.create_memory("child", parent_id=root["id"])
    grandchild = alice.create_memory("grandchild", parent_id=child["id"])
    sibling = alice.create_memory("sibling", parent_id=root["id"])
    kept_record = alice.remember(keep["id"], "kept")
    records = {m["id"]: alice.remember(m["id"], f"in {m['name']}") for m in (root, child, grandchild, sibling)}
    alice.grant(child["id"], "user:bob", "read")
    alice.post(f"/v1/memories/{grandchild['id']}/snapshots", {"name": "before"})

    answer = alice.delete(f"/v1/memories/{root['id']}")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"id": root["id"], "object": "memory", "deleted": True}

    for memory_id, record in records.items():
        assert_not_found(alice.get(f"/v1/memories/{memory_id}"))
        assert_not_found(alice.get(f"/v1/memories/{memory_id}/records"))
        assert_not_found(alice.get(f"/v1/memories/{memory_id}/records/{record['id']}"))
        assert_not_found(alice.get("/v1/memories", parent=memory_id))
        # Nothing is left behind in the store: no node, no grant, no record version, no snapshot.
        assert tenant_items(local_aws, alice.tenant, memory_id) == [], memory_id

    assert listed_ids(alice) == [keep["id"]]
    assert listed_ids(alice, ancestor=keep["id"]) == []
    assert alice.get(f"/v1/memories/{keep['id']}/records/{kept_record['id']}").status_code == 200
    assert_not_found(alice.delete(f"/v1/memories/{root['id']}"))


@pytest.mark.slow
def test_delete_a_child_updates_the_parent(alice: Client, bob: Client) -> None:
    root = alice.create_memory("root")
    child = alice.create_memory("child", parent_id=root["id"])
    other = alice.create_memory("other", parent_id=root["id"])
    below = alice.create_memory("below", parent_id=child["id"])
    alice.grant(below["id"], "user:bob", "read")
    assert listed_ids(bob) == [below["id"]]

    assert alice.delete(f"/v1/memories/{child['id']}").status_code == 200
    assert get_memory(alice, root["id"])["children"] == {"count": 1}
    assert listed_ids(alice, parent=root["id"]) == [other["id"]]
    assert listed_ids(alice, ancestor=root["id"]) == [other["id"]]
    # bob's grant went with the memory it sat on.
    assert listed_ids(bob) == []
    assert_not_found(bob.get(f"/v1/memories/{below['id']}"))


@pytest.mark.slow
def test_a_deleted_memory_cannot_be_written_or_used_as_parent(alice: Client) -> None:
    memory = alice.create_memory("m")
    assert alice.delete(f"/v1/memories/{memory['id']}").status_code == 200
    assert_not_found(alice.post(f"/v1/memories/{memory['id']}/records", {"type": "fact", "content": "x"}))
    assert_not_found(alice.post("/v1/memories", {"name": "c", "parent_id": memory["id"]}))
    assert_not_found(alice.put(f"/v1/memories/{memory['id']}", {"name": "back"}))
    assert_not_found(alice.post(f"/v1/memories/{memory['id']}/grants", {"principal": "user:x", "privileges": ["read"]}))


# -- listing by parent -------------------------------------------------------------------------


@pytest.mark.slow
def test_listing_by_parent_is_one_level(alice: Client) -> None:
    root = alice.create_memory("root")
    a = alice.create_memory("a", parent_id=root["id"])
    b = alice.create_memory("b", parent_id=root["id"])
    alice.create_memory("a1", parent_id=a["id"])
    answer = alice.get("/v1/memories", parent=root["id"])
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["object"] == "list"
    assert body["next_cursor"] is None
    assert sorted(m["id"] for m in body["data"]) == sorted([a["id"], b["id"]])
    for memory in body["data"]:
        assert set(memory) == MEMORY_FIELDS
        assert memory["parent_id"] == root["id"]
        assert memory["ancestors"] == [root["id"]]
        assert memory["privileges"] == ALL_PRIVILEGES
    by_id = {m["id"]: m for m in body["data"]}
    assert by_id[a["id"]]["children"] == {"count": 1}
    assert by_id[b["id"]]["children"] == {"count": 0}
    assert listed_ids(alice, parent=b["id"]) == []


def test_listing_of_an_unknown_parent_is_not_found(alice: Client) -> None:
    assert_not_found(alice.get("/v1/memories", parent="hmem_" + "3" * 32))
    assert_not_found(alice.get("/v1/memories", ancestor="hmem_" + "3" * 32))


def test_parent_and_ancestor_together_are_refused(alice: Client) -> None:
    root = alice.create_memory("root")
    assert_invalid(alice.get("/v1/memories", parent=root["id"], ancestor=root["id"]))


@pytest.mark.slow
def test_pagination_walks_every_child_once(alice: Client) -> None:
    root = alice.create_memory("root")
    children = [alice.create_memory(f"c{i}", parent_id=root["id"]) for i in range(5)]

    first = alice.get("/v1/memories", parent=root["id"], limit=2)
    assert first.status_code == 200, first.text
    assert len(first.json()["data"]) == 2
    assert isinstance(first.json()["next_cursor"], str)

    pages = []
    cursor = None
    while True:
        answer = alice.get("/v1/memories", parent=root["id"], limit=2, cursor=cursor)
        assert answer.status_code == 200, answer.text
        pages.append([m["id"] for m in answer.json()["data"]])
        cursor = answer.json()["next_cursor"]
        if cursor is None:
            break
    assert [len(p) for p in pages] == [2, 2, 1]
    seen = [memory_id for page in pages for memory_id in page]
    assert sorted(seen) == sorted(c["id"] for c in children)
    assert len(set(seen)) == 5
    # Creation order (ties broken by id), stable across pages.
    expected = [c["id"] for c in sorted(children, key=lambda c: (c["createdAt"], c["id"]))]
    assert seen == expected

    exact = alice.get("/v1/memories", parent=root["id"], limit=5)
    assert len(exact.json()["data"]) == 5
    assert exact.json()["next_cursor"] is None
    assert len(alice.get("/v1/memories", parent=root["id"], limit=100).json()["data"]) == 5


@pytest.mark.slow
def test_default_page_size_is_20(alice: Client) -> None:
    root = alice.create_memory("root")
    for i in range(21):
        alice.create_memory(f"c{i}", parent_id=root["id"])
    answer = alice.get("/v1/memories", parent=root["id"])
    assert answer.status_code == 200
    assert len(answer.json()["data"]) == 20
    rest = alice.get("/v1/memories", parent=root["id"], cursor=answer.json()["next_cursor"])
    assert len(rest.json()["data"]) == 1
    assert rest.json()["next_cursor"] is None


@pytest.mark.parametrize("limit", ["0", "101", "-1", "abc"])
def test_bad_limit_is_invalid(alice: Client, limit: str) -> None:
    root = alice.create_memory("root")
    assert_invalid(alice.get("/v1/memories", parent=root["id"], limit=limit))
    assert_invalid(alice.get("/v1/memories", limit=limit))
    assert_invalid(alice.get("/v1/memories", ancestor=root["id"], limit=limit))


@pytest.mark.slow
@pytest.mark.parametrize("cursor", ["garbage", "!!!", "eyJrIjoiZW50cnkifQ", "e30", "bnVsbA"])
def test_garbage_cursor_is_invalid(alice: Client, cursor: str) -> None:
    root = alice.create_memory("root")
    alice.create_memory("c", parent_id=root["id"])
    assert_invalid(alice.get("/v1/memories", parent=root["id"], cursor=cursor))


@pytest.mark.slow
def test_a_cursor_from_another_listing_is_invalid(alice: Client) -> None:
    root = alice.create_memory("root")
    alice.create_memory("second root")
    for i in range(3):
        alice.create_memory(f"c{i}", parent_id=root["id"])
    entry_cursor = alice.get("/v1/memories", limit=1).json()["next_cursor"]
    assert entry_cursor
    assert_invalid(alice.get("/v1/memories", parent=root["id"], cursor=entry_cursor))
    children_cursor = alice.get("/v1/memories", parent=root["id"], limit=1).json()["next_cursor"]
    assert children_cursor
    assert_invalid(alice.get("/v1/memories", cursor=children_cursor))


# -- entry points ------------------------------------------------------------------------------


@pytest.mark.slow
def test_entry_points_are_roots_for_their_creator(alice: Client, bob: Client) -> None:
    one = alice.create_memory("one")
    two = alice.create_memory("two")
    alice.create_memory("child", parent_id=one["id"])
    bob.create_memory("bob's")
    assert sorted(listed_ids(alice)) == sorted([one["id"], two["id"]])


@pytest.mark.slow
def test_entry_points_start_where_the_caller_is_granted(alice: Client, bob: Client) -> None:
    root = alice.create_memory("Company")
    sales = alice.create_memory("Sales", parent_id=root["id"])
    acme = alice.create_memory("Acme", parent_id=sales["id"])
    eng = alice.create_memory("Eng", parent_id=root["id"])
    alice.grant(sales["id"], "user:bob", "read")
    alice.grant(acme["id"], "user:bob", "write")  # below an entry point: not one itself
    alice.grant(eng["id"], "user:bob", "read")

    entries = list_all(bob)
    assert sorted(m["id"] for m in entries) == sorted([sales["id"], eng["id"]])
    for entry in entries:
        assert entry["parent_id"] is None  # the parent is one bob cannot see
        assert entry["ancestors"] == []
    by_id = {m["id"]: m for m in entries}
    assert by_id[sales["id"]]["privileges"] == ["read"]
    assert by_id[sales["id"]]["children"] == {"count": 1}

    acme_for_bob = get_memory(bob, acme["id"])
    assert acme_for_bob["parent_id"] == sales["id"]
    assert acme_for_bob["ancestors"] == [sales["id"]]
    assert acme_for_bob["privileges"] == ["read", "write"]

    # Once bob may see the root, it is his only entry point.
    alice.grant(root["id"], "user:bob", "read")
    assert listed_ids(bob) == [root["id"]]
    assert get_memory(bob, acme["id"])["ancestors"] == [root["id"], sales["id"]]


@pytest.mark.slow
def test_entry_points_paginate(alice: Client) -> None:
    created = [alice.create_memory(f"r{i}")["id"] for i in range(5)]
    first = alice.get("/v1/memories", limit=3)
    assert first.status_code == 200
    assert len(first.json()["data"]) == 3
    second = alice.get("/v1/memories", limit=3, cursor=first.json()["next_cursor"])
    assert second.status_code == 200
    assert len(second.json()["data"]) == 2
    assert second.json()["next_cursor"] is None
    seen = [m["id"] for m in first.json()["data"] + second.json()["data"]]
    assert sorted(seen) == sorted(created)


def test_no_memories_is_an_empty_list(alice: Client) -> None:
    answer = alice.get("/v1/memories")
    assert answer.status_code == 200
    assert answer.json() == {"object": "list", "data": [], "next_cursor": None}


# -- ancestor= ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_ancestor_lists_every_descendant(alice: Client) -> None:
    root = alice.create_memory("root")
    a = alice.create_memory("a", parent_id=root["id"])
    b = alice.create_memory("b", parent_id=root["id"])
    a1 = alice.create_memory("a1", parent_id=a["id"])
    a1x = alice.create_memory("a1x", parent_id=a1["id"])
    alice.create_memory("unrelated")
    found = list_all(alice, ancestor=root["id"])
    assert sorted(m["id"] for m in found) == sorted([a["id"], b["id"], a1["id"], a1x["id"]])
    assert root["id"] not in [m["id"] for m in found]
    by_id = {m["id"]: m for m in found}
    assert by_id[a1x["id"]]["ancestors"] == [root["id"], a["id"], a1["id"]]
    assert sorted(listed_ids(alice, ancestor=a["id"])) == sorted([a1["id"], a1x["id"]])
    assert listed_ids(alice, ancestor=a1x["id"]) == []

    paged = []
    cursor = None
    while True:
        answer = alice.get("/v1/memories", ancestor=root["id"], limit=1, cursor=cursor)
        assert answer.status_code == 200
        assert len(answer.json()["data"]) == 1
        paged.append(answer.json()["data"][0]["id"])
        cursor = answer.json()["next_cursor"]
        if cursor is None:
            break
    assert sorted(paged) == sorted(by_id)


@pytest.mark.slow
def test_ancestor_reaches_below_a_restricted_node_only_where_granted(alice: Client, bob: Client) -> None:
    """A restricted node bob cannot see hides its subtree, except a descendant with its own grant."""
    root = alice.create_memory("root")
    open_child = alice.create_memory("open", parent_id=root["id"])
    private = alice.create_memory("private", parent_id=root["id"], restricted=True)
    hidden = alice.create_memory("hidden", parent_id=private["id"])
    shared = alice.create_memory("shared", parent_id=private["id"])
    below_shared = alice.create_memory("below shared", parent_id=shared["id"])
    alice.grant(root["id"], "user:bob", "read")
    alice.grant(shared["id"], "user:bob", "read")

    found = list_all(bob, ancestor=root["id"])
    assert sorted(m["id"] for m in found) == sorted([open_child["id"], shared["id"], below_shared["id"]])
    by_id = {m["id"]: m for m in found}
    # bob cannot see `private`, so `shared` enters with no parent bob may name.
    assert by_id[shared["id"]]["parent_id"] is None
    assert by_id[shared["id"]]["ancestors"] == []
    assert by_id[below_shared["id"]]["parent_id"] == shared["id"]
    assert by_id[below_shared["id"]]["ancestors"] == [shared["id"]]
    assert by_id[open_child["id"]]["ancestors"] == [root["id"]]

    assert_not_found(bob.get("/v1/memories", ancestor=private["id"]))
    assert_not_found(bob.get(f"/v1/memories/{hidden['id']}"))
    assert get_memory(bob, root["id"])["children"] == {"count": 1}
    assert sorted(listed_ids(bob)) == sorted([root["id"], shared["id"]])

    # alice sees all of it.
    assert len(listed_ids(alice, ancestor=root["id"])) == 5


# -- the ancestors field -----------------------------------------------------------------------


@pytest.mark.slow
def test_ancestors_stop_where_the_caller_stops_seeing(alice: Client, bob: Client) -> None:
    l1 = alice.create_memory("l1")
    l2 = alice.create_memory("l2", parent_id=l1["id"])
    l3 = alice.create_memory("l3", parent_id=l2["id"])
    l4 = alice.create_memory("l4", parent_id=l3["id"])
    assert get_memory(alice, l4["id"])["ancestors"] == [l1["id"], l2["id"], l3["id"]]

    alice.grant(l3["id"], "user:bob", "read")
    read = get_memory(bob, l4["id"])
    assert read["ancestors"] == [l3["id"]]
    assert read["parent_id"] == l3["id"]
    top = get_memory(bob, l3["id"])
    assert top["ancestors"] == []
    assert top["parent_id"] is None

    alice.grant(l2["id"], "user:bob", "read")
    assert get_memory(bob, l4["id"])["ancestors"] == [l2["id"], l3["id"]]
    assert get_memory(bob, l3["id"])["parent_id"] == l2["id"]


@pytest.mark.slow
def test_ancestors_of_a_restricted_node(alice: Client, bob: Client) -> None:
    """restricted stops grants, not placement: a caller who may see the parent is shown it."""
    root = alice.create_memory("root")
    private = alice.create_memory("private", parent_id=root["id"], restricted=True)
    inside = alice.create_memory("inside", parent_id=private["id"])
    assert get_memory(alice, inside["id"])["ancestors"] == [root["id"], private["id"]]
    assert get_memory(alice, private["id"])["parent_id"] == root["id"]

    alice.grant(private["id"], "user:bob", "read")
    assert get_memory(bob, inside["id"])["ancestors"] == [private["id"]]
    assert get_memory(bob, private["id"])["parent_id"] is None
    assert listed_ids(bob) == [private["id"]]


@pytest.mark.slow
def test_listing_shows_each_memory_as_the_caller_sees_it(alice: Client, make_client: ClientFactory) -> None:
    carol = make_client("user:carol")
    root = alice.create_memory("root")
    child = alice.create_memory("child", parent_id=root["id"])
    alice.grant(child["id"], "user:carol", "read", "write")
    alice.create_memory("grandchild", parent_id=child["id"])
    entries = list_all(carol)
    assert [m["id"] for m in entries] == [child["id"]]
    assert entries[0]["privileges"] == ["read", "write"]
    assert entries[0]["children"] == {"count": 1}
    grandchildren = list_all(carol, parent=child["id"])
    assert [m["privileges"] for m in grandchildren] == [["read", "write"]]
    assert [m["ancestors"] for m in grandchildren] == [[child["id"]]]


def forged_cursor(kind: str, position: Any) -> str:
    raw_json = json.dumps({"k": kind, "p": position}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw_json).decode().rstrip("=")


@pytest.mark.slow
@pytest.mark.parametrize(
    "position", ["x", [1], {"a": 1}, 5, [None, None]], ids=["str", "short", "dict", "int", "nulls"]
)
def test_a_forged_cursor_is_invalid_not_a_server_error(alice: Client, position: Any) -> None:
    """A cursor is opaque: one built by hand, even in the right envelope, is refused with 422."""
    root = alice.create_memory("root")
    alice.create_memory("c", parent_id=root["id"])
    for kind, query in (("children", {"parent": root["id"]}), ("entry", {}), ("descendants", {"ancestor": root["id"]})):
        assert_invalid(alice.get("/v1/memories", cursor=forged_cursor(kind, position), **query))
