"""Writes whose outcome is unknown. Every write carries an Idempotency-Key, so the store may send it
again, same key and same bytes, to learn what happened: the server runs it once and replays its answer.
When no attempt brings an answer, the write is `write_unconfirmed` (it may have happened) and, when no
attempt reached the server, `unavailable` (nothing changed). Faults are injected in the client's
transport, in front of the real local server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any, Literal

import pytest

pytest.importorskip("a13n_harness", reason="the harness extra (a13n-harness) is not installed")

import httpx2
from a13n_harness import AgentSpec, HarnessBuilder
from a13n_harness.capabilities import RecordMemoryCapability, RecordMount
from a13n_harness.providers.memory import MemoryStoreError
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from tests.harness.conftest import OpenRecords, Stage
from tests.integration.conftest import Client

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

type Fault = Literal["lost", "unsent", "server_error", "throttled", "in_progress"]
WRITES = frozenset({"POST", "PATCH", "DELETE", "PUT"})


class FaultyTransport(httpx2.AsyncBaseTransport):
    """The real transport, with one planned fault per write attempt (reads pass through).

    lost: the server gets the request and answers; the answer never arrives. unsent: the connection
    fails before anything is sent. server_error, throttled, in_progress: an answer stands in for the
    server's (503, 429, 409 idempotency_in_progress) and the request goes no further.
    """

    def __init__(self, *faults: Fault) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self.faults = list(faults)
        self.requests: list[httpx2.Request] = []

    @property
    def writes(self) -> list[httpx2.Request]:
        return [r for r in self.requests if r.method in WRITES and not r.url.path.endswith("/recall")]

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        is_write = request.method in WRITES and not request.url.path.endswith("/recall")
        fault = self.faults.pop(0) if is_write and self.faults else None
        if fault == "unsent":
            raise httpx2.ConnectError("injected: connection refused", request=request)
        if fault in ("server_error", "throttled", "in_progress"):
            status, code = {
                "server_error": (503, "memory_unavailable"),
                "throttled": (429, "rate_limited"),
                "in_progress": (409, "idempotency_in_progress"),
            }[fault]
            return httpx2.Response(status, json={"error": {"code": code, "message": "injected"}}, request=request)
        response = await self._inner.handle_async_request(request)
        if fault == "lost":
            await response.aread()
            await response.aclose()
            raise httpx2.ReadTimeout("injected: the answer was lost", request=request)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def facts(client: Client, memory_id: str) -> list[dict[str, Any]]:
    answer = client.get(f"/v1/memories/{memory_id}/records", types="fact", limit=100)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["data"])


def same_attempts(requests: list[httpx2.Request]) -> bool:
    """Every attempt of one write: one Idempotency-Key, one method, address and body."""
    keys = {r.headers.get("idempotency-key") for r in requests}
    return len(keys) == 1 and None not in keys and len({(r.method, str(r.url), r.content) for r in requests}) == 1


async def test_a_lost_answer_is_learned_by_sending_again_and_the_record_is_written_once(
    alice: Client, memory: str, open_records: OpenRecords
) -> None:
    transport = FaultyTransport("lost")
    async with open_records(alice, memory, transport) as store:
        added = await store.add("Alice drinks green tea.")

    assert len(transport.writes) == 2
    assert same_attempts(transport.writes)
    assert [(r["id"], r["content"]) for r in facts(alice, memory)] == [(added.id, "Alice drinks green tea.")]


@pytest.mark.parametrize(
    ("faults", "code", "written"),
    [
        (("lost", "lost", "lost"), "write_unconfirmed", 1),
        (("server_error",) * 3, "write_unconfirmed", 0),
        (("in_progress",) * 3, "write_unconfirmed", 0),
        (("unsent",) * 3, "unavailable", 0),
        (("throttled",) * 3, "unavailable", 0),
        (("unsent", "lost", "throttled"), "write_unconfirmed", 1),
    ],
)
async def test_a_write_no_attempt_confirms(
    faults: tuple[Fault, ...], code: str, written: int, alice: Client, memory: str, open_records: OpenRecords
) -> None:
    """Unconfirmed when an attempt may have reached the server; unavailable when none did. Either way
    it was made at most once."""
    transport = FaultyTransport(*faults)
    async with open_records(alice, memory, transport) as store:
        with pytest.raises(MemoryStoreError) as failed:
            await store.add("Alice drinks green tea.")

    assert failed.value.code == code
    assert len(transport.writes) == 3
    assert same_attempts(transport.writes)
    assert len(facts(alice, memory)) == written


@pytest.mark.parametrize("fault", ["server_error", "throttled", "in_progress", "unsent"])
async def test_a_write_is_attempted_again_until_it_is_answered(
    fault: Fault, alice: Client, memory: str, open_records: OpenRecords
) -> None:
    transport = FaultyTransport(fault, fault)
    async with open_records(alice, memory, transport) as store:
        added = await store.add("Alice drinks green tea.")

    assert len(transport.writes) == 3
    assert same_attempts(transport.writes)
    assert [r["id"] for r in facts(alice, memory)] == [added.id]


async def test_an_update_whose_answer_was_lost_makes_one_version(
    alice: Client, memory: str, open_records: OpenRecords
) -> None:
    async with open_records(alice, memory) as store:
        added = await store.add("Alice drinks green tea.")
    transport = FaultyTransport("lost")
    async with open_records(alice, memory, transport) as store:
        updated = await store.update(added.id, "Alice drinks oolong tea.")

    assert (updated.id, updated.text) == (added.id, "Alice drinks oolong tea.")
    assert same_attempts(transport.writes)
    versions = alice.get(f"/v1/memories/{memory}/records/{added.id}/history").json()["data"]
    assert [(v["content"], v["status"]) for v in versions] == [
        ("Alice drinks green tea.", "superseded"),
        ("Alice drinks oolong tea.", "active"),
    ]


async def test_a_delete_whose_answer_was_lost_is_confirmed_by_the_replay(
    alice: Client, memory: str, open_records: OpenRecords
) -> None:
    async with open_records(alice, memory) as store:
        added = await store.add("Alice drinks green tea.")
    transport = FaultyTransport("lost")
    async with open_records(alice, memory, transport) as store:
        await store.delete(added.id)

    assert [r.method for r in transport.writes] == ["DELETE", "DELETE"]
    assert same_attempts(transport.writes)
    assert facts(alice, memory) == []


async def test_each_write_has_a_key_of_its_own_and_reads_have_none(
    alice: Client, memory: str, open_records: OpenRecords
) -> None:
    """Two adds of the same text are two records: a key is never derived from the content."""
    transport = FaultyTransport()
    async with open_records(alice, memory, transport) as store:
        first = await store.add("Alice drinks green tea.")
        second = await store.add("Alice drinks green tea.")
        await store.update(first.id, "Alice drinks oolong tea.")
        await store.delete(second.id)
        await store.search("tea", limit=5)
        await store.list(limit=5)

    keys = [r.headers.get("idempotency-key") for r in transport.writes]
    assert len(keys) == 4
    assert len(set(keys)) == 4
    assert None not in keys
    reads = [r for r in transport.requests if r not in transport.writes]
    assert reads
    assert all("idempotency-key" not in r.headers for r in reads)
    assert [r["content"] for r in facts(alice, memory)] == ["Alice drinks oolong tea."]


async def test_the_model_is_told_a_write_is_unconfirmed(alice: Client, memory: str, open_records: OpenRecords) -> None:
    """Through the harness: the add tool fails with write_unconfirmed, which tells the model to search
    before writing again; the harness does not repeat the call."""
    seen: list[list[ModelMessage]] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        seen.append(list(messages))
        if len(seen) == 1:
            args = json.dumps({"memory": "facts", "text": "Alice drinks green tea."})
            yield {0: DeltaToolCall(name="memory_record_add", json_args=args, tool_call_id="call-add")}
        else:
            yield "I could not confirm that I remembered it."

    transport = FaultyTransport("lost", "lost", "lost")
    async with open_records(alice, memory, transport) as store:
        capability = RecordMemoryCapability([RecordMount("facts", store, "write")])
        agent = HarnessBuilder(instrumentation=None).build(
            AgentSpec(), output_type=str, capabilities=(capability,), model=FunctionModel(stream_function=stream)
        )
        result = await agent.run("I drink green tea. Remember that.")

    assert result.output_or_raise() == "I could not confirm that I remembered it."
    assert len(transport.writes) == 3
    parts = [part for message in seen[-1] if isinstance(message, ModelRequest) for part in message.parts]
    (failure,) = [p for p in parts if isinstance(p, ToolReturnPart) and p.tool_name == "memory_record_add"]
    assert failure.outcome == "failed"
    assert json.loads(str(failure.content))["error"] == "write_unconfirmed"
    assert len(facts(alice, memory)) == 1


@pytest.fixture
def quick_workflows(stage: Stage) -> Iterator[None]:
    """Erase answers 202 at once instead of waiting for its workflow (the path a long erase takes)."""
    removal = stage.aws.container.removal  # type: ignore[union-attr]
    saved = removal.wait_seconds
    removal.wait_seconds = 0.0
    yield
    removal.wait_seconds = saved


async def test_a_purge_that_outlasts_its_request_is_followed_to_its_end(
    alice: Client, memory: str, open_records: OpenRecords, quick_workflows: None
) -> None:
    async with open_records(alice, memory) as store:
        await store.add("Alice drinks green tea.")
        await store.purge()
    assert alice.get(f"/v1/memories/{memory}/records", types="fact", include="all").json()["data"] == []


async def test_a_purge_whose_erase_fails_is_unconfirmed_and_a_new_purge_finishes_it(
    alice: Client, memory: str, stage: Stage, open_records: OpenRecords, quick_workflows: None
) -> None:
    async with open_records(alice, memory) as store:
        await store.add("Alice drinks green tea.")
        stage.aws.fail_step("erase_records", 10)
        try:
            with pytest.raises(MemoryStoreError) as failed:
                await store.purge()
        finally:
            stage.aws.fail_step("erase_records", 0)
        assert failed.value.code == "write_unconfirmed"
        assert len(facts(alice, memory)) == 1

        await store.purge()
    assert facts(alice, memory) == []


class AnswerForgotten(FaultyTransport):
    """`lost`, and then the server's kept answer is gone too (too large to keep, or kept by a server that
    died before it could): the retry meets the write's own marker, 409 idempotency_key_committed."""

    def __init__(self, stage: Stage, *faults: Fault) -> None:
        super().__init__(*faults)
        self.stage = stage

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            return await super().handle_async_request(request)
        except httpx2.ReadTimeout:
            client = self.stage.aws.container.dynamodb
            table = self.stage.aws.settings.idempotency_table_name
            for item in client.scan(TableName=table)["Items"]:
                if "status" in item:  # Powertools' kept answers; the write markers stay
                    client.delete_item(TableName=table, Key={"id": item["id"]})
            raise


@pytest.mark.parametrize("write", ["add", "update", "delete"])
async def test_a_write_whose_kept_answer_is_gone_is_read_back_not_written_again(
    write: str, stage: Stage, alice: Client, memory: str, open_records: OpenRecords
) -> None:
    async with open_records(alice, memory) as store:
        first = await store.add("Alice drinks green tea.")
    transport = AnswerForgotten(stage, "lost")
    async with open_records(alice, memory, transport) as store:
        if write == "add":
            added = await store.add("Bob drinks coffee.")
            assert added.text == "Bob drinks coffee."
        elif write == "update":
            updated = await store.update(first.id, "Alice drinks oolong tea.")
            assert (updated.id, updated.text) == (first.id, "Alice drinks oolong tea.")
        else:
            await store.delete(first.id)

    assert len(transport.writes) == 2
    assert same_attempts(transport.writes)
    contents = sorted(r["content"] for r in facts(alice, memory))
    assert contents == {"add": ["Alice drinks green tea.", "Bob drinks coffee."],
                        "update": ["Alice drinks oolong tea."], "delete": []}[write]
    if write == "update":
        history = alice.get(f"/v1/memories/{memory}/records/{first.id}/history").json()["data"]
        assert len(history) == 2  # one revision, not two
