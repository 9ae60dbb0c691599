"""§3 and §13 through the local gateway: grants, inheritance, the restricted cutoff, groups, and an
authorization matrix that asserts, for each principal, memory and operation, exactly 404, 403 or
success.

The world (one tenant; alice creates every node):

    root                 user:bob read; user:dora read, write, create
    ├── sales            group:sales read, write            (carol is in group:sales)
    │   └── acme         user:gina delete
    ├── eng              harness:h1 create                  (hank is harness:h1)
    └── private  (restricted)
        └── notes        user:erin read

dave holds nothing. Keys with the same principals and groups in another tenant hold nothing either.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests

from tests.integration.conftest import Client, ClientFactory, error_code, purge_tenant
from uhp_memories.api.routes import ROUTES
from uhp_memories.local.moto_env import LocalAws

R, W, C, D = "read", "write", "create", "delete"
ALL = [R, W, C, D]

TREE: dict[str, str | None] = {
    "root": None,
    "sales": "root",
    "acme": "sales",
    "eng": "root",
    "private": "root",
    "notes": "private",
}
RESTRICTED = {"private"}
GRANTS: list[tuple[str, str, list[str]]] = [
    ("root", "user:bob", [R]),
    ("root", "user:dora", [R, W, C]),
    ("sales", "group:sales", [R, W]),
    ("eng", "harness:h1", [C]),
    ("acme", "user:gina", [D]),
    ("notes", "user:erin", [R]),
]
PRINCIPALS: dict[str, tuple[str, tuple[str, ...]]] = {
    "alice": ("user:alice", ()),
    "bob": ("user:bob", ()),
    "carol": ("user:carol", ("group:sales",)),
    "dora": ("user:dora", ()),
    "hank": ("harness:h1", ()),
    "gina": ("user:gina", ()),
    "erin": ("user:erin", ()),
    "dave": ("user:dave", ()),
}
# The same principals and group in another tenant: nothing crosses tenants.
OUTSIDERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "alice@other": ("user:alice", ()),
    "carol@other": ("user:carol", ("group:sales",)),
    "bob@other": ("user:bob", ()),
}
EXPECTED: dict[str, dict[str, set[str]]] = {
    "alice": {node: set(ALL) for node in TREE},
    "bob": {"root": {R}, "sales": {R}, "acme": {R}, "eng": {R}},
    "carol": {"sales": {R, W}, "acme": {R, W}},
    "dora": {node: {R, W, C} for node in ("root", "sales", "acme", "eng")},
    "hank": {"eng": {C}},
    "gina": {"acme": {D}},
    "erin": {"notes": {R}},
    "dave": {},
}
LEAF_FIRST = ["acme", "notes", "sales", "eng", "private", "root"]


def privileges_of(who: str, node: str) -> set[str]:
    return EXPECTED.get(who, {}).get(node, set())


def ordered(privileges: set[str]) -> list[str]:
    return [p for p in ALL if p in privileges]


def sees(who: str, node: str | None) -> bool:
    return node is not None and bool(privileges_of(who, node))


def expected_ancestors(who: str, node: str) -> list[str]:
    found: list[str] = []
    parent = TREE[node]
    while parent is not None and sees(who, parent):
        found.insert(0, parent)
        parent = TREE[parent]
    return found


def expected_children(who: str, node: str) -> set[str]:
    return {n for n, parent in TREE.items() if parent == node and sees(who, n)}


def expected_descendants(who: str, node: str) -> set[str]:
    found: set[str] = set()
    frontier = [node]
    while frontier:
        below = [n for n, parent in TREE.items() if parent in frontier]
        found.update(n for n in below if sees(who, n))
        frontier = below
    return found


def expected_entry_points(who: str) -> set[str]:
    return {n for n in TREE if sees(who, n) and not sees(who, TREE[n])}


# -- the world ---------------------------------------------------------------------------------


@dataclass
class World:
    clients: dict[str, Client]
    ids: dict[str, str] = field(default_factory=dict)
    records: dict[str, str] = field(default_factory=dict)
    grants: dict[tuple[str, str], str] = field(default_factory=dict)  # (node, principal) -> grant id
    restricted: dict[str, bool] = field(default_factory=dict)

    @property
    def alice(self) -> Client:
        return self.clients["alice"]

    def path(self, node: str, suffix: str = "") -> str:
        return f"/v1/memories/{self.ids[node]}{suffix}"

    def node_of(self, memory_id: str) -> str:
        return {v: k for k, v in self.ids.items()}.get(memory_id, memory_id)


def make_clients(make_client: ClientFactory, principals: dict[str, tuple[str, tuple[str, ...]]],
                 tenant_name: str | None = None) -> dict[str, Client]:
    return {name: make_client(p, groups=g, tenant_name=tenant_name) for name, (p, g) in principals.items()}


def build_world(clients: dict[str, Client]) -> World:
    world = World(clients)
    alice = world.alice
    for node, parent in TREE.items():
        fields: dict[str, Any] = {"restricted": node in RESTRICTED}
        if parent is not None:
            fields["parent_id"] = world.ids[parent]
        world.ids[node] = alice.create_memory(node, **fields)["id"]
        world.restricted[node] = node in RESTRICTED
        world.records[node] = alice.remember(world.ids[node], f"a fact kept in {node}")["id"]
    for node, principal, privileges in GRANTS:
        world.grants[(node, principal)] = alice.grant(world.ids[node], principal, *privileges)["id"]
    return world


@pytest.fixture
def world(make_client: ClientFactory) -> World:
    return build_world(make_clients(make_client, PRINCIPALS))


@pytest.fixture
def outsiders(make_client: ClientFactory, local_aws: LocalAws) -> Iterator[dict[str, Client]]:
    other = "t-other-" + secrets.token_hex(6)
    yield make_clients(make_client, OUTSIDERS, tenant_name=other)
    purge_tenant(local_aws, other)


def outcome(answer: requests.Response) -> tuple[int, str | None]:
    if answer.status_code >= 400:
        try:
            return answer.status_code, error_code(answer)
        except (ValueError, KeyError):
            return answer.status_code, "<no error body>"
    return answer.status_code, None


def assert_outcome(answer: requests.Response, status: int, code: str | None = None) -> None:
    assert outcome(answer) == (status, code), answer.text


# -- the operations of the matrix --------------------------------------------------------------

Call = Callable[[World, Client, str], requests.Response]
Check = Callable[[World, str, str, requests.Response], str | None]
After = Callable[[World, str, requests.Response], None]


@dataclass(frozen=True)
class Op:
    name: str
    needs: str | None  # None: any privilege (seeing the memory is enough)
    success: int
    call: Call
    check: Check | None = None
    after: After | None = None
    unseen: tuple[int, str | None] = (404, "memory_not_found")  # the answer to a caller that holds nothing


def _check_get(world: World, who: str, node: str, answer: requests.Response) -> str | None:
    body = answer.json()
    want = {
        "privileges": ordered(privileges_of(who, node)),
        "ancestors": [world.ids[n] for n in expected_ancestors(who, node)],
        "parent_id": world.ids[TREE[node]] if sees(who, TREE[node]) else None,  # type: ignore[index]
        "children": {"count": len(expected_children(who, node))},
    }
    got = {key: body[key] for key in want}
    return None if got == want else f"memory as seen: want {want}, got {got}"


def _check_ids(expected: Callable[[str, str], set[str]]) -> Check:
    def check(world: World, who: str, node: str, answer: requests.Response) -> str | None:
        got = {world.node_of(m["id"]) for m in answer.json()["data"]}
        want = expected(who, node)
        return None if got == want else f"listed {sorted(got)}, want {sorted(want)}"

    return check


def _check_written_by(world: World, who: str, node: str, answer: requests.Response) -> str | None:
    kind, _, ident = PRINCIPALS[who][0].partition(":")
    got = answer.json()["written_by"]
    return None if got == {"kind": kind, "id": ident} else f"written_by {got}"


def _after_revise(world: World, node: str, answer: requests.Response) -> None:
    world.records[node] = answer.json()["id"]


def _forget(world: World, client: Client, node: str) -> requests.Response:
    record = world.alice.remember(world.ids[node], "to be forgotten")
    return client.delete(world.path(node, f"/records/{record['id']}"))


def _restrict(world: World, client: Client, node: str) -> requests.Response:
    return client.put(world.path(node), {"restricted": not world.restricted[node]})


def _after_restrict(world: World, node: str, answer: requests.Response) -> None:
    assert answer.json()["restricted"] is (not world.restricted[node])
    undo = world.alice.put(world.path(node), {"restricted": world.restricted[node]})
    assert undo.status_code == 200, undo.text


def _revoke(world: World, client: Client, node: str) -> requests.Response:
    grant = world.alice.grant(world.ids[node], "user:zed", R)
    return client.delete(world.path(node, f"/grants/{grant['id']}"))


def _check_grants_listing(world: World, who: str, node: str, answer: requests.Response) -> str | None:
    """Grants on the node and on the ancestors the caller sees, up to the restricted cutoff."""
    on = {world.node_of(g["memory_id"]) for g in answer.json()["data"]}
    reach = [node]
    current = node
    while current not in RESTRICTED and TREE[current] is not None:
        current = TREE[current]  # type: ignore[assignment]
        reach.append(current)
    want = {n for n in reach if sees(who, n)}
    return None if on == want else f"grants on {sorted(on)}, want {sorted(want)}"


def _check_child(world: World, who: str, node: str, answer: requests.Response) -> str | None:
    body = answer.json()
    # A harness writes only where its list lets it (domain/access/model.py HarnessReach): its new child too.
    held = [R, C, D] if PRINCIPALS[who][0].startswith("harness:") else ALL
    if body["privileges"] != held:
        return f"the creator holds {body['privileges']} on its new child"
    if body["parent_id"] != world.ids[node]:
        return f"child placed under {body['parent_id']}"
    return None


READ_OPS = [
    Op("get", None, 200, lambda w, c, n: c.get(w.path(n)), _check_get),
    Op("list_children", None, 200, lambda w, c, n: c.get("/v1/memories", parent=w.ids[n]),
       _check_ids(expected_children)),
    Op("list_descendants", None, 200, lambda w, c, n: c.get("/v1/memories", ancestor=w.ids[n]),
       _check_ids(expected_descendants)),
    Op("list_records", R, 200, lambda w, c, n: c.get(w.path(n, "/records"))),
    Op("get_record", R, 200, lambda w, c, n: c.get(w.path(n, f"/records/{w.records[n]}"))),
    Op("list_snapshots", R, 200, lambda w, c, n: c.get(w.path(n, "/snapshots"))),
]
WRITE_OPS = [
    Op("remember", W, 201, lambda w, c, n: c.post(w.path(n, "/records"), {"type": "fact", "content": "new"}),
       _check_written_by),
    Op("revise", W, 200, lambda w, c, n: c.patch(w.path(n, f"/records/{w.records[n]}"), {"content": "revised"}),
       _check_written_by, _after_revise),
    Op("forget", W, 200, _forget),
    Op("snapshot", W, 201, lambda w, c, n: c.post(w.path(n, "/snapshots"), {"name": "s-" + secrets.token_hex(4)})),
    Op("rename", W, 200, lambda w, c, n: c.put(w.path(n), {"name": f"{n} renamed", "description": "described"})),
]
DELETE_OPS = [
    Op("restrict", D, 200, _restrict, None, _after_restrict),
    Op("list_grants", D, 200, lambda w, c, n: c.get(w.path(n, "/grants")), _check_grants_listing),
    Op("add_grant", D, 201, lambda w, c, n: c.post(w.path(n, "/grants"), {"principal": "user:zed", "privileges": [R]})),
    Op("revoke_grant", D, 200, _revoke),
]
CREATE_OPS = [
    Op("create_child", C, 201, lambda w, c, n: c.post("/v1/memories", {"name": "child", "parent_id": w.ids[n]}),
       _check_child),
]


# A harness's list (§9): each cell works on a harness of its own. A fresh one is handed to the caller by
# the tenant's administrator (nobody else writes a list first: test_harnesses.py); one alice arranged
# names the caller as an owner beside her. Adding or changing an entry the harness
# does not hold needs delete on its memory (it grants); sending it unchanged needs only to see it; an
# owner detaches any entry, one it cannot see included. Non-owners: test_only_owners_reach_a_harness.


def _attach(client: Client, harness: str, *entries: dict[str, Any]) -> requests.Response:
    return client.put(f"/v1/harnesses/{harness}/memories", {"memories": list(entries)})


def _entry(world: World, node: str, access: str = R) -> dict[str, Any]:
    return {"memory_id": world.ids[node], "access": access, "default": False}


def _handed(client: Client) -> str:
    """A fresh harness whose list the tenant's administrator handed to `client`."""
    harness = "hm-" + secrets.token_hex(6)
    client.claim(harness)
    return harness


def _shared_with(world: World, who: Client, node: str) -> str:
    """A harness alice arranged with the node attached, owned by her and by `who`."""
    harness = _handed(world.alice)
    arranged = _attach(world.alice, harness, _entry(world, node))
    assert arranged.status_code == 200, arranged.text
    owners = world.alice.put(f"/v1/harnesses/{harness}/owners", {"owners": sorted({"user:alice", who.principal})})
    assert owners.status_code == 200, owners.text
    return harness


def _stored(world: World, who: str, answer: requests.Response) -> list[dict[str, Any]]:
    """The list as stored: read by alice where she owns it (she sees every node), else by the caller
    it was handed to (it named only what it sees)."""
    harness = answer.json()["harness_id"]
    listed = world.alice.get(f"/v1/harnesses/{harness}/memories")
    if listed.status_code == 403:
        listed = world.clients[who].get(f"/v1/harnesses/{harness}/memories")
    return listed.json()["memories"] if listed.status_code == 200 else []


def _check_list(answered: Callable[[World, str, str], list[dict[str, Any]]],
                stored: Callable[[World, str, str], list[dict[str, Any]]]) -> Check:
    def check(world: World, who: str, node: str, answer: requests.Response) -> str | None:
        got = (answer.json()["memories"], _stored(world, who, answer))
        want = (answered(world, who, node), stored(world, who, node))
        return None if got == want else f"answered and stored {got}, want {want}"

    return check


HARNESS_LIST_OPS = [
    Op("attach_entry", D, 200,
       lambda w, c, n: _attach(c, _handed(c), _entry(w, n)),
       _check_list(lambda w, who, n: [_entry(w, n)], lambda w, who, n: [_entry(w, n)])),
    Op("change_entry", D, 200,
       lambda w, c, n: _attach(c, _shared_with(w, c, n), _entry(w, n, W)),
       _check_list(lambda w, who, n: [_entry(w, n, W)], lambda w, who, n: [_entry(w, n, W)])),
    Op("resend_entry", None, 200,
       lambda w, c, n: _attach(c, _shared_with(w, c, n), _entry(w, n)),
       _check_list(lambda w, who, n: [_entry(w, n)], lambda w, who, n: [_entry(w, n)])),
    Op("detach_entry", None, 200,
       lambda w, c, n: _attach(c, _shared_with(w, c, n)),
       _check_list(lambda w, who, n: [], lambda w, who, n: []),
       unseen=(200, None)),
]


def expected_outcome(who: str, node: str, needs: str | None, success: int) -> tuple[int, str | None]:
    held = privileges_of(who, node)
    if not held:
        return 404, "memory_not_found"
    if needs is None or needs in held:
        return success, None
    return 403, "memory_forbidden"


def run_cell(world: World, who: str, node: str, op: Op) -> str | None:
    want = expected_outcome(who, node, op.needs, op.success) if sees(who, node) else op.unseen
    answer = op.call(world, world.clients[who], node)
    got = outcome(answer)
    if got != want:
        return f"{who:6} {node:8} {op.name:16} want {want} got {got}: {answer.text[:160]}"
    if got[1] is None:
        problem = op.check(world, who, node, answer) if op.check else None
        if op.after:
            op.after(world, node, answer)
        if problem:
            return f"{who:6} {node:8} {op.name:16} {problem}"
    return None


@pytest.mark.slow
@pytest.mark.parametrize(
    "ops",
    [READ_OPS, WRITE_OPS, DELETE_OPS, CREATE_OPS, HARNESS_LIST_OPS],
    ids=["read-ops", "write-ops", "delete-ops", "create-ops", "harness-list-ops"],
)
def test_authorization_matrix(world: World, ops: list[Op]) -> None:
    mismatches = [
        problem
        for op in ops
        for who in PRINCIPALS
        for node in TREE
        if (problem := run_cell(world, who, node, op)) is not None
    ]
    assert not mismatches, "\n" + "\n".join(mismatches)


@pytest.mark.slow
def test_only_owners_reach_a_harness(world: World, outsiders: dict[str, Client]) -> None:
    """A harness with every node attached by alice: the harness itself (hank) reads the entries on
    memories it can see, alice (its owner) all of them; every other principal of the tenant is refused
    every operation on it, whatever it holds on the memories; another tenant has no such harness. An
    owner added by group reads what it can see, and how many entries it cannot."""
    everything = [_entry(world, node) for node in TREE]
    world.alice.claim("h1")
    assert_outcome(_attach(world.alice, "h1", *everything), 200)
    # Attaching granted hank read on every node; without those on private and notes he no longer sees them.
    for node in ("private", "notes"):
        grant = next(g for g in world.alice.get(world.path(node, "/grants")).json()["data"]
                     if g["principal"] == "harness:h1" and g["memory_id"] == world.ids[node])
        assert_outcome(world.alice.delete(world.path(node, f"/grants/{grant['id']}")), 200)
    reads = {"alice": (everything, 0), "hank": (everything[:4], 2)}  # TREE's order: private, notes last
    mismatches = []
    for who, client in {**world.clients, **outsiders}.items():
        answer = client.get("/v1/harnesses/h1/memories")
        if who in reads:
            memories, hidden = reads[who]
            got = (answer.status_code, answer.json().get("memories"), answer.json().get("hidden"))
            if got != (200, memories, hidden):
                mismatches.append(f"{who}: want {memories} hidden {hidden}, got {answer.text[:200]}")
            continue
        if "@" in who:  # another tenant has no harness h1 (one it writes is its own, elsewhere)
            if outcome(answer) != (404, "memories_not_attached"):
                mismatches.append(f"{who}: want 404 memories_not_attached, got {outcome(answer)}")
            continue
        for act in (answer, _attach(client, "h1"), client.get("/v1/harnesses/h1/prime"),
                    client.put("/v1/harnesses/h1/owners", {"owners": []})):
            if outcome(act) != (403, "memory_forbidden"):
                mismatches.append(f"{who}: want 403 memory_forbidden, got {outcome(act)} {act.text[:120]}")
    assert not mismatches, "\n" + "\n".join(mismatches)
    assert world.alice.get("/v1/harnesses/h1/memories").json()["memories"] == everything
    assert_outcome(world.alice.put("/v1/harnesses/h1/owners", {"owners": ["user:alice", "group:sales"]}), 200)
    carol = world.clients["carol"].get("/v1/harnesses/h1/memories").json()
    assert (carol["memories"], carol["hidden"]) == ([_entry(world, "sales"), _entry(world, "acme")], 4)


@pytest.mark.slow
def test_delete_matrix(world: World) -> None:
    """Every refusal first (nothing may disappear), then one permitted delete per node, leaves first."""
    mismatches = []
    for node in LEAF_FIRST:
        for who in PRINCIPALS:
            want = expected_outcome(who, node, D, 200)
            if want[0] == 200:
                continue
            answer = world.clients[who].delete(world.path(node))
            if outcome(answer) != want:
                mismatches.append(f"{who:6} {node:8} delete want {want} got {outcome(answer)}")
    for node in TREE:
        assert world.alice.get(world.path(node)).status_code == 200, f"{node} vanished after a refused delete"
    assert not mismatches, "\n" + "\n".join(mismatches)

    deleters = {"acme": "gina"}  # gina holds nothing but delete, and only on acme
    for node in LEAF_FIRST:
        who = deleters.get(node, "alice")
        assert expected_outcome(who, node, D, 200) == (200, None)
        assert_outcome(world.clients[who].delete(world.path(node)), 200)
        assert_outcome(world.alice.get(world.path(node)), 404, "memory_not_found")
    assert world.alice.get("/v1/memories").json()["data"] == []


@pytest.mark.slow
def test_effective_privileges_for_everyone(world: World, outsiders: dict[str, Client]) -> None:
    """GET as each principal: the privileges field is the union over the chain, cut by restricted;
    a memory the caller holds nothing on, or another tenant's, is memory_not_found."""
    mismatches = []
    for who, client in {**world.clients, **outsiders}.items():
        for node in TREE:
            answer = client.get(world.path(node))
            held = privileges_of(who, node)
            if not held:
                if outcome(answer) != (404, "memory_not_found"):
                    mismatches.append(f"{who} {node}: want 404 got {outcome(answer)}")
            elif answer.status_code != 200 or answer.json()["privileges"] != ordered(held):
                mismatches.append(f"{who} {node}: want {ordered(held)} got {answer.status_code} {answer.text[:120]}")
    assert not mismatches, "\n" + "\n".join(mismatches)


# -- nothing crosses tenants -------------------------------------------------------------------

OTHER_IDS = {
    "job_id": "hjob_" + "0" * 32,
    "run_id": "hcon_" + "0" * 32,
    "name": "open_deals_for",
}
BODIES: dict[tuple[str, str], Any] = {
    ("PUT", "/v1/memories/{memory_id}"): {"name": "taken"},
    ("POST", "/grants"): {"principal": "user:mallory", "privileges": ALL},
    ("POST", "/records"): {"type": "fact", "content": "planted"},
    ("PATCH", "/records/{record_id}"): {"content": "changed"},
    ("POST", "/snapshots"): {"name": "mine"},
    ("POST", "/recall"): {"query": "what did Acme say?"},
    ("PUT", "/queries/{name}"): {
        "description": "d", "requires": "read", "language": "uhp-recall", "body": {"text": "deal"},
        "params": {"type": "object", "properties": {}},
    },
    ("POST", "/queries/{name}"): {"params": {}},
    ("POST", "/query"): {"language": "cypher", "statement": "MATCH (n) RETURN n", "params": {}},
    ("POST", "/observe"): {"episodes": [{"content": "an episode"}]},
    ("POST", "/erase"): {"record_ids": []},
    ("POST", "/grep"): {"pattern": "planted"},
    ("PUT", "/prime"): {"record_ids": []},
    ("POST", "/consolidations"): {},
    ("POST", "/consolidations/{run_id}/revert"): {},
    ("PUT", "/consolidation-schedule"): {"every_minutes": 60},
    ("POST", "/records/{record_id}/operations/{name}"): {},
}


def route_body(method: str, path: str) -> Any:
    for (m, suffix), body in BODIES.items():
        if m == method and path.endswith(suffix):
            return body
    return None


MEMORY_ROUTES = [r for r in ROUTES if "{memory_id}" in r.path]


@pytest.mark.slow
def test_another_tenants_memory_is_not_found_on_every_route(world: World, outsiders: dict[str, Client]) -> None:
    """Every route under /v1/memories/{id}, asked by principals and groups that hold grants in the owner's
    tenant but live in another, answers memory_not_found, whatever the route's own privilege."""
    assert len(MEMORY_ROUTES) >= 20
    mismatches = []
    for node in ("root", "acme", "notes"):
        params = {
            "memory_id": world.ids[node],
            "record_id": world.records[node],
            "grant_id": next(gid for (n, _), gid in world.grants.items() if n == node),
            **OTHER_IDS,
        }
        for route in MEMORY_ROUTES:
            path = route.path.format(**params)
            body = route_body(route.method, route.path)
            for who, client in outsiders.items():
                answer = client.request(route.method, path, body)
                if outcome(answer) != (404, "memory_not_found"):
                    mismatches.append(
                        f"{who} {route.method} {route.path} on {node}: {outcome(answer)} {answer.text[:120]}"
                    )
    assert not mismatches, "\n" + "\n".join(mismatches)

    # Nothing was planted or changed in the owner's tenant.
    for node in TREE:
        memory = world.alice.get(world.path(node)).json()
        assert memory["name"] == node
        assert memory["records"] == {"count": 1}
        grants = world.alice.get(world.path(node, "/grants")).json()["data"]
        assert all(g["principal"] != "user:mallory" for g in grants)
        records = world.alice.get(world.path(node, "/records")).json()["data"]
        assert [r["id"] for r in records] == [world.records[node]]


@pytest.mark.slow
def test_another_tenants_ids_cannot_be_used_as_parent_or_in_listings(
    world: World, outsiders: dict[str, Client]
) -> None:
    mallory = outsiders["alice@other"]  # the same principal name as the owner, in another tenant
    own = mallory.create_memory("mine")
    assert_outcome(mallory.post("/v1/memories", {"name": "c", "parent_id": world.ids["root"]}), 404, "memory_not_found")
    assert_outcome(mallory.put(f"/v1/memories/{own['id']}", {"parent_id": world.ids["root"]}), 404,
                   "memory_not_found")
    assert_outcome(mallory.get("/v1/memories", parent=world.ids["root"]), 404, "memory_not_found")
    assert_outcome(mallory.get("/v1/memories", ancestor=world.ids["root"]), 404, "memory_not_found")
    assert [m["id"] for m in mallory.get("/v1/memories").json()["data"]] == [own["id"]]
    # A record id of the other tenant through one's own memory is not there.
    assert_outcome(mallory.get(f"/v1/memories/{own['id']}/records/{world.records['root']}"), 404,
                   "memory_record_not_found")
    # Attaching another tenant's memory to a harness is refused as unknown.
    attach = mallory.put(
        "/v1/harnesses/chrn_1/memories", {"memories": [{"memory_id": world.ids["root"], "access": "read"}]}
    )
    assert_outcome(attach, 404, "memory_not_found")
    # And the owner's tree is untouched by any of it.
    assert world.alice.get(world.path("root")).json()["children"] == {"count": 3}
    assert world.alice.get(f"/v1/memories/{own['id']}").status_code == 404


@pytest.mark.slow
def test_a_grant_to_a_principal_name_does_not_reach_another_tenant(
    world: World, outsiders: dict[str, Client]
) -> None:
    world.alice.grant(world.ids["private"], "user:bob", R)
    assert world.clients["bob"].get(world.path("private")).status_code == 200
    assert_outcome(outsiders["bob@other"].get(world.path("private")), 404, "memory_not_found")
    assert outsiders["bob@other"].get("/v1/memories").json()["data"] == []


# -- records through the wrong memory ----------------------------------------------------------


@pytest.mark.slow
def test_a_record_asked_through_another_readable_memory_is_not_found(world: World) -> None:
    """bob reads both sales and eng; a record of sales asked through eng is memory_record_not_found on every
    record route, and nothing happens to it."""
    bob, alice = world.clients["bob"], world.alice
    record = world.records["sales"]
    for client in (bob, alice):
        assert_outcome(client.get(world.path("eng", f"/records/{record}")), 404, "memory_record_not_found")
        assert_outcome(client.get(world.path("eng", f"/records/{record}/history")), 404, "memory_record_not_found")
    assert_outcome(alice.patch(world.path("eng", f"/records/{record}"), {"content": "x"}), 404,
                   "memory_record_not_found")
    assert_outcome(alice.delete(world.path("eng", f"/records/{record}")), 404, "memory_record_not_found")
    # carol may write sales and acme: the parent's record through the child is not there either.
    carol = world.clients["carol"]
    assert_outcome(carol.get(world.path("acme", f"/records/{record}")), 404, "memory_record_not_found")
    assert_outcome(carol.patch(world.path("acme", f"/records/{record}"), {"content": "x"}), 404,
                   "memory_record_not_found")
    assert_outcome(carol.delete(world.path("acme", f"/records/{record}")), 404, "memory_record_not_found")

    kept = alice.get(world.path("sales", f"/records/{record}"))
    assert kept.status_code == 200
    assert (kept.json()["status"], kept.json()["version"], kept.json()["content"]) == (
        "active", 1, "a fact kept in sales")
    assert alice.get(world.path("eng")).json()["records"] == {"count": 1}


@pytest.mark.slow
def test_a_record_of_an_invisible_memory_through_a_readable_one(world: World) -> None:
    bob = world.clients["bob"]
    secret = world.records["private"]
    assert_outcome(bob.get(world.path("root", f"/records/{secret}")), 404, "memory_record_not_found")
    assert_outcome(bob.get(world.path("private", f"/records/{secret}")), 404, "memory_not_found")


@pytest.mark.slow
def test_references_to_unreadable_records_look_like_references_to_nothing(world: World) -> None:
    """§4.2, §13: a reader without read on the target gets {memory_id, record_id, available: false} and
    nothing else, the same answer as for a target that does not exist."""
    alice, bob = world.alice, world.clients["bob"]
    missing = "hrec_" + "0" * 32
    refs = [
        {"rel": "derived_from", "memory_id": world.ids["private"], "record_id": world.records["private"]},
        {"rel": "derived_from", "memory_id": world.ids["eng"], "record_id": missing},
        {"rel": "see_also", "memory_id": world.ids["eng"], "record_id": world.records["eng"]},
    ]
    record = alice.remember(world.ids["sales"], "promoted", references=refs)
    seen = bob.get(world.path("sales", f"/records/{record['id']}"))
    assert seen.status_code == 200, seen.text
    assert seen.json()["references"] == [
        {"memory_id": world.ids["private"], "record_id": world.records["private"], "available": False},
        {"memory_id": world.ids["eng"], "record_id": missing, "available": False},
        {"rel": "see_also", "memory_id": world.ids["eng"], "record_id": world.records["eng"], "available": True},
    ]
    owner_view = alice.get(world.path("sales", f"/records/{record['id']}")).json()["references"]
    assert owner_view[0] == {"rel": "derived_from", "memory_id": world.ids["private"],
                             "record_id": world.records["private"], "available": True}


# -- grants: create, list, delete --------------------------------------------------------------


def test_grant_create_answers_the_grant(alice: Client) -> None:
    memory = alice.create_memory("m")
    answer = alice.post(
        f"/v1/memories/{memory['id']}/grants", {"principal": "user:bob", "privileges": ["write", "read", "read"]}
    )
    assert answer.status_code == 201, answer.text
    grant = answer.json()
    assert re.match(r"^hgrt_[0-9a-f]{32}$", grant["id"])
    assert grant["object"] == "memory.grant"
    assert grant["memory_id"] == memory["id"]
    assert grant["principal"] == "user:bob"
    assert grant["privileges"] == ["read", "write"]
    assert grant["implicit"] is False
    assert grant["created_by"] == "user:alice"
    assert isinstance(grant["createdAt"], int)


@pytest.mark.parametrize("principal", ["user:bob", "harness:chrn_41c0", "service:etl", "key:k_1", "group:sales"])
def test_every_documented_principal_kind_can_be_granted(alice: Client, principal: str) -> None:
    memory = alice.create_memory("m")
    assert alice.grant(memory["id"], principal, "read")["principal"] == principal


@pytest.mark.slow
def test_grant_listing_shows_own_and_inherited_grants(alice: Client) -> None:
    root = alice.create_memory("root")
    child = alice.create_memory("child", parent_id=root["id"])
    leaf = alice.create_memory("leaf", parent_id=child["id"])
    on_root = alice.grant(root["id"], "user:bob", "read")
    on_child = alice.grant(child["id"], "group:sales", "read", "write")

    answer = alice.get(f"/v1/memories/{leaf['id']}/grants")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["object"] == "list"
    assert body["next_cursor"] is None
    listed = {(g["memory_id"], g["principal"], tuple(g["privileges"]), g["implicit"]) for g in body["data"]}
    assert listed == {
        (leaf["id"], "user:alice", tuple(ALL), True),
        (child["id"], "user:alice", tuple(ALL), True),
        (child["id"], "group:sales", ("read", "write"), False),
        (root["id"], "user:alice", tuple(ALL), True),
        (root["id"], "user:bob", ("read",), False),
    }
    ids = {g["id"] for g in body["data"]}
    assert {on_root["id"], on_child["id"]} <= ids

    # On the root only the root's own grants.
    root_grants = alice.get(f"/v1/memories/{root['id']}/grants").json()["data"]
    assert {(g["memory_id"], g["principal"]) for g in root_grants} == {
        (root["id"], "user:alice"), (root["id"], "user:bob")}


@pytest.mark.slow
def test_grant_listing_stops_at_the_restricted_cutoff(alice: Client) -> None:
    root = alice.create_memory("root")
    alice.grant(root["id"], "user:bob", "read")
    private = alice.create_memory("private", parent_id=root["id"], restricted=True)
    alice.grant(private["id"], "user:erin", "read")
    inside = alice.create_memory("inside", parent_id=private["id"])

    for memory_id in (private["id"], inside["id"]):
        grants = alice.get(f"/v1/memories/{memory_id}/grants").json()["data"]
        assert root["id"] not in {g["memory_id"] for g in grants}
    inside_grants = alice.get(f"/v1/memories/{inside['id']}/grants").json()["data"]
    assert {(g["memory_id"], g["principal"]) for g in inside_grants} == {
        (inside["id"], "user:alice"), (private["id"], "user:alice"), (private["id"], "user:erin")}


@pytest.mark.slow
def test_grant_delete(alice: Client, bob: Client) -> None:
    memory = alice.create_memory("m")
    grant = alice.grant(memory["id"], "user:bob", "read")
    assert bob.get(f"/v1/memories/{memory['id']}").status_code == 200

    answer = alice.delete(f"/v1/memories/{memory['id']}/grants/{grant['id']}")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"id": grant["id"], "object": "memory.grant", "deleted": True}
    listed = alice.get(f"/v1/memories/{memory['id']}/grants").json()["data"]
    assert grant["id"] not in {g["id"] for g in listed}
    assert_outcome(bob.get(f"/v1/memories/{memory['id']}"), 404, "memory_not_found")
    assert bob.get("/v1/memories").json()["data"] == []
    # Deleting it again: gone.
    assert_outcome(alice.delete(f"/v1/memories/{memory['id']}/grants/{grant['id']}"), 404, "memory_grant_not_found")


@pytest.mark.slow
def test_delete_unknown_grant_is_grant_not_found(alice: Client) -> None:
    root = alice.create_memory("root")
    child = alice.create_memory("child", parent_id=root["id"])
    on_root = alice.grant(root["id"], "user:bob", "read")
    for grant_id in ("hgrt_" + "0" * 32, "garbage", on_root["id"]):
        # on_root sits on the root, not on the child: a grant is deleted where it sits.
        assert_outcome(alice.delete(f"/v1/memories/{child['id']}/grants/{grant_id}"), 404, "memory_grant_not_found")
    assert on_root["id"] in {g["id"] for g in alice.get(f"/v1/memories/{root['id']}/grants").json()["data"]}


def test_grant_routes_on_unknown_memory_are_memory_not_found(alice: Client) -> None:
    unknown = "hmem_" + "9" * 32
    assert_outcome(alice.get(f"/v1/memories/{unknown}/grants"), 404, "memory_not_found")
    assert_outcome(alice.post(f"/v1/memories/{unknown}/grants", {"principal": "user:bob", "privileges": ["read"]}),
                   404, "memory_not_found")
    assert_outcome(alice.delete(f"/v1/memories/{unknown}/grants/hgrt_{'0' * 32}"), 404, "memory_not_found")


@pytest.mark.parametrize(
    "body",
    [
        {"principal": "alice", "privileges": ["read"]},
        {"principal": "robot:r2", "privileges": ["read"]},
        {"principal": "user:", "privileges": ["read"]},
        {"principal": "", "privileges": ["read"]},
        {"principal": "user:bob", "privileges": []},
        {"principal": "user:bob", "privileges": ["admin"]},
        {"principal": "user:bob", "privileges": ["read", "own"]},
        {"principal": "user:bob", "privileges": "read"},
        {"principal": "user:bob", "privileges": ["read", "write", "create", "delete", "read"]},
        {"principal": "user:bob"},
        {"privileges": ["read"]},
        {"principal": "user:bob", "privileges": ["read"], "implicit": True},
        {"principal": "user:bob", "privileges": ["read"], "memory_id": "hmem_" + "0" * 32},
        {"principal": ["user:bob"], "privileges": ["read"]},
    ],
    ids=[
        "no-kind", "unknown-kind", "empty-id", "empty", "no-privileges", "unknown-privilege", "one-unknown",
        "privileges-string", "five-privileges", "missing-privileges", "missing-principal", "implicit-field",
        "memory-id-field", "principal-list",
    ],
)
def test_bad_grants_are_invalid(alice: Client, body: dict[str, Any]) -> None:
    memory = alice.create_memory("m")
    answer = alice.post(f"/v1/memories/{memory['id']}/grants", body)
    assert_outcome(answer, 422, "memory_invalid")
    grants = alice.get(f"/v1/memories/{memory['id']}/grants").json()["data"]
    assert [g["principal"] for g in grants] == ["user:alice"]


# -- inheritance, the cutoff, the creator, groups ----------------------------------------------


def get_privileges(client: Client, memory_id: str) -> list[str] | None:
    answer = client.get(f"/v1/memories/{memory_id}")
    if answer.status_code == 404:
        assert error_code(answer) == "memory_not_found"
        return None
    assert answer.status_code == 200, answer.text
    return answer.json()["privileges"]


@pytest.mark.slow
def test_privileges_are_the_union_over_the_ancestor_chain(alice: Client, bob: Client) -> None:
    root = alice.create_memory("root")
    mid = alice.create_memory("mid", parent_id=root["id"])
    leaf = alice.create_memory("leaf", parent_id=mid["id"])
    alice.grant(root["id"], "user:bob", "read")
    alice.grant(mid["id"], "user:bob", "write")
    alice.grant(leaf["id"], "user:bob", "create")
    assert get_privileges(bob, root["id"]) == ["read"]
    assert get_privileges(bob, mid["id"]) == ["read", "write"]
    assert get_privileges(bob, leaf["id"]) == ["read", "write", "create"]
    # Access is additive: a narrower grant lower down takes nothing away.
    alice.grant(leaf["id"], "user:bob", "read")
    assert get_privileges(bob, leaf["id"]) == ["read", "write", "create"]


@pytest.mark.slow
def test_the_restricted_cutoff(alice: Client, bob: Client) -> None:
    root = alice.create_memory("root")
    alice.grant(root["id"], "user:bob", "read", "write")
    private = alice.create_memory("private", parent_id=root["id"], restricted=True)
    inside = alice.create_memory("inside", parent_id=private["id"])
    # Ancestor grants stop at the restricted node.
    assert get_privileges(bob, private["id"]) is None
    assert get_privileges(bob, inside["id"]) is None
    # Its own grants flow down as usual, and only they count.
    alice.grant(private["id"], "user:bob", "create")
    assert get_privileges(bob, private["id"]) == ["create"]
    assert get_privileges(bob, inside["id"]) == ["create"]
    assert_outcome(bob.get(f"/v1/memories/{inside['id']}/records"), 403, "memory_forbidden")
    # Lifting the cutoff lets the ancestor grants through again.
    assert alice.put(f"/v1/memories/{private['id']}", {"restricted": False}).status_code == 200
    assert get_privileges(bob, inside["id"]) == ["read", "write", "create"]
    # Restricting an open node cuts what it inherited, at once, for its whole subtree.
    assert alice.put(f"/v1/memories/{private['id']}", {"restricted": True}).status_code == 200
    assert get_privileges(bob, inside["id"]) == ["create"]
    # The creator of a restricted node keeps its own grant on it.
    assert get_privileges(alice, inside["id"]) == ALL


@pytest.mark.slow
def test_a_restricted_node_below_a_restricted_node(alice: Client, bob: Client) -> None:
    outer = alice.create_memory("outer", restricted=True)
    alice.grant(outer["id"], "user:bob", "read")
    inner = alice.create_memory("inner", parent_id=outer["id"], restricted=True)
    below = alice.create_memory("below", parent_id=inner["id"])
    assert get_privileges(bob, outer["id"]) == ["read"]
    assert get_privileges(bob, inner["id"]) is None
    assert get_privileges(bob, below["id"]) is None


@pytest.mark.slow
def test_the_creators_grant_is_real_listed_and_inherited(world: World) -> None:
    hank, alice = world.clients["hank"], world.alice
    answer = hank.post("/v1/memories", {"name": "hank's", "parent_id": world.ids["eng"]})
    assert answer.status_code == 201, answer.text
    mine = answer.json()
    # The creator's grant is ALL; a harness writes only where its list lets it (HarnessReach).
    assert mine["privileges"] == [R, C, D]
    assert mine["parent_id"] == world.ids["eng"]
    assert mine["ancestors"] == [world.ids["eng"]]  # hank cannot see root
    assert get_privileges(alice, mine["id"]) == ALL  # alice's grants on root and eng flow down

    grants = hank.get(f"/v1/memories/{mine['id']}/grants")
    assert grants.status_code == 200, grants.text
    listed = {(world.node_of(g["memory_id"]), g["principal"], tuple(g["privileges"]), g["implicit"])
              for g in grants.json()["data"]}
    assert listed == {
        (mine["id"], "harness:h1", tuple(ALL), True),
        ("eng", "user:alice", tuple(ALL), True),
        ("eng", "harness:h1", ("create",), False),
    }  # nothing on root, which hank cannot see
    implicit = next(g for g in grants.json()["data"] if g["memory_id"] == mine["id"])
    assert implicit["created_by"] == "harness:h1"

    # It flows down like any other grant.
    grandchild = alice.create_memory("below hank's", parent_id=mine["id"])
    assert get_privileges(hank, grandchild["id"]) == [R, C, D]
    alice.claim("h1")  # the administrator hands h1's list to alice: a harness never writes its list first
    assert_outcome(hank.put("/v1/harnesses/h1/memories", {"memories": [
        {"memory_id": mine["id"], "access": W}]}), 200)  # the harness attaches its own memory
    assert get_privileges(hank, grandchild["id"]) == ALL
    # The creator is still only create on the parent.
    assert get_privileges(hank, world.ids["eng"]) == ["create"]
    assert {m["id"] for m in hank.get("/v1/memories").json()["data"]} == {world.ids["eng"]}


@pytest.mark.slow
def test_group_grants_apply_to_members(world: World, make_client: ClientFactory) -> None:
    carol = world.clients["carol"]
    other_member = make_client("service:etl", groups=("group:sales", "group:eng"))
    not_a_member = make_client("user:sally", groups=("group:sales-eu",))
    for client in (carol, other_member):
        assert get_privileges(client, world.ids["sales"]) == ["read", "write"]
        assert get_privileges(client, world.ids["acme"]) == ["read", "write"]
    assert get_privileges(not_a_member, world.ids["sales"]) is None

    # A member's own grants add to the group's.
    world.alice.grant(world.ids["acme"], "user:carol", "create")
    assert get_privileges(carol, world.ids["acme"]) == ["read", "write", "create"]
    assert get_privileges(other_member, world.ids["acme"]) == ["read", "write"]

    # A record written through a group grant is stamped with the member, not the group.
    written = carol.post(world.path("sales", "/records"), {"type": "fact", "content": "from carol"})
    assert written.status_code == 201, written.text
    assert written.json()["written_by"] == {"kind": "user", "id": "carol"}

    # Revoking the group grant revokes it for every member.
    revoked = world.alice.delete(world.path("sales", f"/grants/{world.grants[('sales', 'group:sales')]}"))
    assert revoked.status_code == 200, revoked.text
    assert get_privileges(other_member, world.ids["sales"]) is None
    assert get_privileges(other_member, world.ids["acme"]) is None
    assert get_privileges(carol, world.ids["sales"]) is None
    assert get_privileges(carol, world.ids["acme"]) == ["create"]
    assert {m["id"] for m in carol.get("/v1/memories").json()["data"]} == {world.ids["acme"]}


# -- what a caller may see ---------------------------------------------------------------------


@pytest.mark.slow
def test_an_invisible_memory_is_never_named(world: World) -> None:
    """Entry points, child listings, descendant listings, the ancestors field, children counts and grant
    listings name only memories the caller holds a privilege on."""
    mismatches = []
    node_of = world.node_of
    for who, client in world.clients.items():
        entries = {node_of(m["id"]) for m in client.get("/v1/memories", limit=100).json()["data"]}
        if entries != expected_entry_points(who):
            mismatches.append(f"{who}: entry points {sorted(entries)}, want {sorted(expected_entry_points(who))}")
        for node in TREE:
            if not sees(who, node):
                continue
            memory = client.get(world.path(node)).json()
            named = {node_of(a) for a in memory["ancestors"]} | {node_of(memory["parent_id"] or "")} - {""}
            if not all(sees(who, n) for n in named):
                mismatches.append(f"{who}: {node} names {sorted(named)}")
            listed = [m for m in client.get("/v1/memories", ancestor=world.ids[node]).json()["data"]]
            for m in listed:
                for a in [*m["ancestors"], m["parent_id"]]:
                    if a is not None and not sees(who, node_of(a)):
                        mismatches.append(f"{who}: ancestor listing of {node} names {node_of(a)}")
            if D in privileges_of(who, node):
                grants = client.get(world.path(node, "/grants")).json()["data"]
                hidden = {node_of(g["memory_id"]) for g in grants if not sees(who, node_of(g["memory_id"]))}
                if hidden:
                    mismatches.append(f"{who}: grants on {node} name {sorted(hidden)}")
    assert not mismatches, "\n" + "\n".join(mismatches)


@pytest.mark.slow
def test_children_count_and_listing_skip_hidden_children(world: World) -> None:
    bob, alice = world.clients["bob"], world.alice
    assert alice.get(world.path("root")).json()["children"] == {"count": 3}
    assert bob.get(world.path("root")).json()["children"] == {"count": 2}
    assert {world.node_of(m["id"]) for m in bob.get("/v1/memories", parent=world.ids["root"]).json()["data"]} == {
        "sales", "eng"}
    assert {world.node_of(m["id"]) for m in bob.get("/v1/memories", ancestor=world.ids["root"]).json()["data"]} == {
        "sales", "acme", "eng"}
    # erin reads notes, below private which she cannot see: notes is where she enters, with no parent.
    erin = world.clients["erin"]
    notes = erin.get(world.path("notes")).json()
    assert (notes["parent_id"], notes["ancestors"]) == (None, [])
    assert [m["id"] for m in erin.get("/v1/memories").json()["data"]] == [world.ids["notes"]]
    assert_outcome(erin.get("/v1/memories", parent=world.ids["private"]), 404, "memory_not_found")


# -- write without delete widens nothing -------------------------------------------------------


@pytest.mark.slow
def test_write_and_create_without_delete_cannot_widen_reach(world: World) -> None:
    dora, alice = world.clients["dora"], world.alice
    bob_grant = world.grants[("root", "user:bob")]

    assert_outcome(dora.put(world.path("sales"), {"restricted": True}), 403, "memory_forbidden")
    assert_outcome(dora.put(world.path("sales"), {"name": "mine now", "restricted": True}), 403, "memory_forbidden")
    assert_outcome(dora.get(world.path("root", "/grants")), 403, "memory_forbidden")
    assert_outcome(dora.post(world.path("root", "/grants"), {"principal": "user:dora", "privileges": [D]}), 403,
                   "memory_forbidden")
    assert_outcome(dora.post(world.path("sales", "/grants"), {"principal": "user:dora", "privileges": ALL}), 403,
                   "memory_forbidden")
    assert_outcome(dora.delete(world.path("root", f"/grants/{bob_grant}")), 403, "memory_forbidden")
    assert_outcome(dora.delete(world.path("sales")), 403, "memory_forbidden")
    assert_outcome(dora.put(world.path("eng"), {"parent_id": world.ids["sales"]}), 403, "memory_forbidden")
    assert_outcome(dora.put(world.path("sales"), {"parent_id": None}), 403, "memory_forbidden")
    assert_outcome(dora.post("/v1/memories", {"name": "x", "parent_id": world.ids["private"]}), 404,
                   "memory_not_found")

    # She may create a child, and holds everything on it, and nothing more above it.
    mine = dora.create_memory("dora's", parent_id=world.ids["root"])
    assert mine["privileges"] == ALL
    assert get_privileges(dora, world.ids["root"]) == ["read", "write", "create"]
    # Her delete on her own child does not let her pull others' memories under it ...
    assert_outcome(dora.put(world.path("sales"), {"parent_id": mine["id"]}), 403, "memory_forbidden")
    assert_outcome(dora.put(world.path("root"), {"parent_id": mine["id"]}), 403, "memory_forbidden")
    # ... nor reach a grant on the root through her child's path.
    assert_outcome(dora.delete(f"/v1/memories/{mine['id']}/grants/{bob_grant}"), 404, "memory_grant_not_found")
    # Granting on her own child reaches only that child.
    assert dora.grant(mine["id"], "user:dave", *ALL)["memory_id"] == mine["id"]
    assert get_privileges(world.clients["dave"], world.ids["root"]) is None

    # Nothing changed above her child.
    sales = alice.get(world.path("sales")).json()
    assert (sales["name"], sales["restricted"], sales["parent_id"]) == ("sales", False, world.ids["root"])
    assert alice.get(world.path("eng")).json()["parent_id"] == world.ids["root"]
    listed = alice.get(world.path("root", "/grants")).json()["data"]
    root_grants = {(g["principal"], tuple(g["privileges"])) for g in listed}
    assert root_grants == {
        ("user:alice", tuple(ALL)), ("user:bob", ("read",)), ("user:dora", ("read", "write", "create"))}


@pytest.mark.slow
def test_a_reader_cannot_rename_even_to_the_same_name(world: World) -> None:
    bob = world.clients["bob"]
    assert_outcome(bob.put(world.path("sales"), {"name": "sales"}), 403, "memory_forbidden")
    assert_outcome(bob.put(world.path("sales"), {"description": ""}), 403, "memory_forbidden")


@pytest.mark.slow
def test_a_no_op_put_by_a_reader_writes_nothing(world: World) -> None:
    """A PUT that changes nothing needs no privilege beyond seeing the memory, and writes nothing."""
    bob, alice = world.clients["bob"], world.alice
    before = alice.get(world.path("sales")).json()
    for body in ({}, {"restricted": False}, {"parent_id": world.ids["root"]}, {"provider": "native"}):
        answer = bob.put(world.path("sales"), body)
        assert answer.status_code == 200, (body, answer.text)
        assert answer.json()["privileges"] == ["read"]
    assert alice.get(world.path("sales")).json() == before


@pytest.mark.slow
def test_only_create_can_create_a_child_but_not_read(world: World) -> None:
    hank = world.clients["hank"]
    assert get_privileges(hank, world.ids["eng"]) == ["create"]
    assert_outcome(hank.get(world.path("eng", "/records")), 403, "memory_forbidden")
    assert_outcome(hank.get(world.path("eng", f"/records/{world.records['eng']}")), 403, "memory_forbidden")
    assert_outcome(hank.post(world.path("eng", "/records"), {"type": "fact", "content": "x"}), 403, "memory_forbidden")
    assert_outcome(hank.put(world.path("eng"), {"name": "x"}), 403, "memory_forbidden")
    child = hank.post("/v1/memories", {"name": "made by hank", "parent_id": world.ids["eng"]})
    assert child.status_code == 201, child.text
    # Creating under a memory that one holds nothing on stays not found.
    assert_outcome(hank.post("/v1/memories", {"name": "x", "parent_id": world.ids["sales"]}), 404, "memory_not_found")


@pytest.mark.slow
def test_a_read_only_principal_is_forbidden_every_change(world: World) -> None:
    bob = world.clients["bob"]
    sales = world.path("sales")
    record = world.records["sales"]
    refusals = [
        bob.post(f"{sales}/records", {"type": "fact", "content": "x"}),
        bob.patch(f"{sales}/records/{record}", {"content": "x"}),
        bob.delete(f"{sales}/records/{record}"),
        bob.post(f"{sales}/snapshots", {"name": "s"}),
        bob.post(f"{sales}/observe", {"episodes": [{"content": "x"}]}),
        bob.put(sales, {"name": "x"}),
        bob.put(sales, {"restricted": True}),
        bob.put(sales, {"parent_id": None}),
        bob.delete(sales),
        bob.get(f"{sales}/grants"),
        bob.post(f"{sales}/grants", {"principal": "user:bob", "privileges": ALL}),
        bob.post("/v1/memories", {"name": "x", "parent_id": world.ids["sales"]}),
    ]
    for answer in refusals:
        assert_outcome(answer, 403, "memory_forbidden")
    memory = world.alice.get(sales).json()
    assert (memory["name"], memory["restricted"], memory["records"], memory["children"]) == (
        "sales", False, {"count": 1}, {"count": 1})


# -- moves change who reaches what -------------------------------------------------------------


@pytest.mark.slow
def test_a_move_needs_delete_on_the_memory_and_create_on_the_new_parent(world: World) -> None:
    alice, gina, dora, bob, hank = (world.clients[n] for n in ("alice", "gina", "dora", "bob", "hank"))
    acme = world.path("acme")
    assert_outcome(dora.put(acme, {"parent_id": world.ids["eng"]}), 403, "memory_forbidden")
    assert_outcome(bob.put(acme, {"parent_id": world.ids["eng"]}), 403, "memory_forbidden")
    assert_outcome(hank.put(acme, {"parent_id": world.ids["eng"]}), 404, "memory_not_found")
    # gina holds delete on acme, and nothing on eng: the new parent is unknown to her.
    assert_outcome(gina.put(acme, {"parent_id": world.ids["eng"]}), 404, "memory_not_found")
    alice.grant(world.ids["eng"], "user:gina", R)
    assert_outcome(gina.put(acme, {"parent_id": world.ids["eng"]}), 403, "memory_forbidden")
    assert alice.get(acme).json()["parent_id"] == world.ids["sales"]

    alice.grant(world.ids["eng"], "user:gina", C)
    moved = gina.put(acme, {"parent_id": world.ids["eng"]})
    assert moved.status_code == 200, moved.text
    assert (moved.json()["parent_id"], moved.json()["ancestors"]) == (world.ids["eng"], [world.ids["eng"]])
    # Inheritance follows the new placement.
    assert get_privileges(world.clients["carol"], world.ids["acme"]) is None
    assert get_privileges(bob, world.ids["acme"]) == ["read"]
    assert get_privileges(gina, world.ids["acme"]) == ["read", "create", "delete"]

    # Moving it to the root needs only delete on it: afterwards only direct grants reach it.
    to_root = gina.put(acme, {"parent_id": None})
    assert to_root.status_code == 200, to_root.text
    assert get_privileges(bob, world.ids["acme"]) is None
    assert get_privileges(dora, world.ids["acme"]) is None
    assert get_privileges(gina, world.ids["acme"]) == ["delete"]
    assert get_privileges(alice, world.ids["acme"]) == ALL
    assert_outcome(gina.put(acme, {"parent_id": world.ids["private"]}), 404, "memory_not_found")


@pytest.mark.slow
def test_moving_under_a_restricted_node_cuts_inherited_access(world: World) -> None:
    alice, bob, carol = world.alice, world.clients["bob"], world.clients["carol"]
    assert alice.put(world.path("sales"), {"parent_id": world.ids["private"]}).status_code == 200
    assert get_privileges(bob, world.ids["sales"]) is None
    assert get_privileges(bob, world.ids["acme"]) is None
    # carol's group grant sits on sales itself, so it moves with it.
    assert get_privileges(carol, world.ids["acme"]) == ["read", "write"]
    assert carol.get(world.path("sales")).json()["parent_id"] is None
    assert bob.get(world.path("root")).json()["children"] == {"count": 1}
    assert {world.node_of(m["id"]) for m in bob.get("/v1/memories", ancestor=world.ids["root"]).json()["data"]} == {
        "eng"}


@pytest.mark.slow
def test_a_change_that_cuts_the_callers_own_reach_takes_effect_and_is_answered(world: World) -> None:
    """delete inherited from sales lets a caller move acme out from under sales, or restrict it; the
    change is made and answered as written (privileges empty), and from then on acme is unknown to it."""
    alice = world.alice
    editor = world.clients["dave"]
    alice.grant(world.ids["sales"], "user:dave", D)
    moved = editor.put(world.path("acme"), {"parent_id": None})
    assert moved.status_code == 200, moved.text
    assert (moved.json()["id"], moved.json()["parent_id"], moved.json()["privileges"]) == (world.ids["acme"], None, [])
    assert alice.get(world.path("acme")).json()["parent_id"] is None
    assert_outcome(editor.get(world.path("acme")), 404, "memory_not_found")

    alice.create_memory("inside sales", parent_id=world.ids["sales"])
    inside = alice.get("/v1/memories", parent=world.ids["sales"]).json()["data"][0]["id"]
    restricted = editor.put(f"/v1/memories/{inside}", {"restricted": True})
    assert restricted.status_code == 200, restricted.text
    assert (restricted.json()["restricted"], restricted.json()["privileges"]) == (True, [])
    assert alice.get(f"/v1/memories/{inside}").json()["restricted"] is True
    assert_outcome(editor.get(f"/v1/memories/{inside}"), 404, "memory_not_found")
