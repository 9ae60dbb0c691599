from tests.integration.conftest import Client, error_code


def test_create_and_read_back(alice: Client) -> None:
    memory = alice.create_memory("Sales", description="what sales knows")
    answer = alice.get(f"/v1/memories/{memory['id']}")
    assert answer.status_code == 200
    assert answer.json()["name"] == "Sales"


def test_unknown_key_is_unauthenticated(alice: Client) -> None:
    alice.key = "nope"
    answer = alice.get("/v1/memories")
    assert answer.status_code == 401
    assert error_code(answer) == "unauthenticated"
