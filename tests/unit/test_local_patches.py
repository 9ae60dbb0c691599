"""Local mode's library patches (uhp_memories.local.patches): each is a module of its own, refuses a
library version it was not written for, is installed by LocalAws.start() and leaves the library's own
code in place again after stop(); Powertools' request state is per thread while installed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import threading
import tomllib
from pathlib import Path
from typing import Any

import pytest

from uhp_memories.local import patches
from uhp_memories.local.moto_env import LocalAws
from uhp_memories.local.patches import (
    Patch,
    PatchVersionMismatch,
    Replacements,
    WrittenFor,
    moto_action_names,
    moto_dynamodb_batch_sizes,
    moto_dynamodb_item_sizes,
    moto_dynamodb_journal,
    moto_dynamodb_queries,
    moto_dynamodb_transactions,
    moto_dynamodb_wire_json,
    moto_lambda_steps,
    moto_s3_journal,
    moto_state_machine_copies,
    moto_stepfunctions_journal,
    powertools_threads,
)

ROOT = Path(__file__).resolve().parents[2]
PATCH_MODULES = [
    moto_action_names,
    moto_dynamodb_batch_sizes,
    moto_dynamodb_item_sizes,
    moto_dynamodb_queries,
    moto_dynamodb_transactions,
    moto_dynamodb_wire_json,
    moto_lambda_steps,
    moto_state_machine_copies,
    powertools_threads,
]
# Installed only by a persistent server (LocalAws with a data dir): they report to its journal.
JOURNAL_PATCH_MODULES = [moto_dynamodb_journal, moto_s3_journal, moto_stepfunctions_journal]
# What the patches replace, named here independently of their code: (module, class or None, attribute).
PATCHED = [
    ("moto.core.responses", None, "method_names_from_class"),
    ("moto.dynamodb.models", None, "copy"),
    ("moto.dynamodb.models", "DynamoDBBackend", "transact_write_items"),
    ("moto.dynamodb.models", "DynamoDBBackend", "update_item"),
    ("moto.dynamodb.models.table", "Table", "query"),
    ("moto.dynamodb.models.table", "Table", "put_item"),
    ("moto.dynamodb.responses", "DynamoResult", "execute_result"),
    ("moto.dynamodb.responses", "DynamoHandler", "batch_get_item"),
    ("moto.dynamodb.models.dynamo_type", "Item", "__init__"),
    ("moto.awslambda_simple.models", "LambdaSimpleBackend", "invoke"),
    ("moto.stepfunctions.models", "StateMachine", "__deepcopy__"),
    *(
        ("aws_lambda_powertools.event_handler.api_gateway", "APIGatewayRestResolver", name)
        for name in ("current_event", "lambda_context", "context", "resolve", "_to_proxy_event")
    ),
]
JOURNAL_PATCHED = [
    *(("moto.dynamodb.responses", "DynamoHandler", name) for name in moto_dynamodb_journal.WRITE_ACTIONS),
    ("moto.s3.models", "S3Backend", "put_object"),
    ("moto.s3.models", "S3Backend", "delete_object"),
    ("moto.s3.responses", "S3Response", "bucket_response"),
    ("moto.s3.responses", "S3Response", "key_response"),
    ("moto.stepfunctions.parser.models", "StepFunctionsParserBackend", "start_execution"),
    ("moto.stepfunctions.parser.backend.execution", "BaseExecutionWorkerCommunication", "terminated"),
]


def pinned_versions() -> dict[str, str]:
    """Distribution -> the version pyproject.toml pins, over every dependency list."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    groups = project["optional-dependencies"].values()
    requirements = [*project["dependencies"], *(r for group in groups for r in group)]
    pins = {}
    for requirement in requirements:
        found = re.match(r"^([A-Za-z0-9_.-]+)(\[[^\]]*\])?==([^;\s]+)", requirement)
        if found:
            pins[found[1].lower()] = found[3]
    return pins


@pytest.mark.parametrize("module", PATCH_MODULES + JOURNAL_PATCH_MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_each_patch_is_written_for_the_pinned_and_installed_library_version(module: Any) -> None:
    written_for: WrittenFor = module.WRITTEN_FOR

    assert pinned_versions()[written_for.distribution] == written_for.version
    assert patches.installed_version(written_for.distribution) == written_for.version


@pytest.mark.slow
def test_each_patch_modules_own_install_refuses_another_version_and_its_uninstall_undoes_it() -> None:
    """Through each module's install() and uninstall(), what LocalAws calls (a journal patch's and the
    step runner's take a listener). In a process of its own: in this one a local stage of another
    suite may hold the patches installed, and an install then only counts one more user."""
    names = [module.__name__ for module in PATCH_MODULES + JOURNAL_PATCH_MODULES]
    probe = textwrap.dedent(
        f"""
        import importlib, inspect, json
        from uhp_memories.local import patches

        real_version = patches.installed_version
        report = {{}}
        for name in {names!r}:
            module = importlib.import_module(name)
            listener = [object()] * len(inspect.signature(module.install).parameters)
            patches.installed_version = lambda distribution: "0.0.1"
            try:
                module.install(*listener)
                refused = None
            except patches.PatchVersionMismatch as error:
                refused = str(error)
            patches.installed_version = real_version
            installed_after_refusal = module.PATCH.installed
            module.install(*listener)
            installed = module.PATCH.installed
            module.uninstall(*listener)
            report[name] = [refused, installed_after_refusal, installed, module.PATCH.installed]
        print(json.dumps(report))
        """
    )
    answer = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert answer.returncode == 0, answer.stderr
    report = json.loads(answer.stdout.strip().splitlines()[-1])

    pins = pinned_versions()
    assert set(report) == set(names)
    for module in PATCH_MODULES + JOURNAL_PATCH_MODULES:
        refused, installed_after_refusal, installed, installed_after_uninstall = report[module.__name__]
        distribution = module.WRITTEN_FOR.distribution
        assert refused is not None, f"{module.__name__}.install() did not check its library's version"
        assert f"{module.__name__} was written for {distribution}=={pins[distribution]}" in refused
        assert "0.0.1" in refused
        assert (installed_after_refusal, installed, installed_after_uninstall) == (False, True, False)


@pytest.mark.parametrize("module", PATCH_MODULES + JOURNAL_PATCH_MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_each_patch_refuses_another_library_version(module: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(patches, "installed_version", lambda distribution: "0.0.1")

    with pytest.raises(PatchVersionMismatch) as refused:
        module.WRITTEN_FOR.check(module.__name__)

    message = str(refused.value)
    assert module.__name__ in message
    assert f"{module.WRITTEN_FOR.distribution}=={module.WRITTEN_FOR.version}" in message
    assert "0.0.1" in message


def test_a_refused_patch_replaces_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    class Library:
        def call(self) -> str:
            return "library"

    original = Library.__dict__["call"]
    applied: list[str] = []

    def apply(replace: Replacements) -> None:
        applied.append("applied")
        replace(Library, "call", lambda self: "patched")

    patch = Patch("a_patch", WrittenFor("moto", "5.2.1"), apply)
    monkeypatch.setattr(patches, "installed_version", lambda distribution: "6.0.0")

    with pytest.raises(PatchVersionMismatch, match=r"a_patch was written for moto==5\.2\.1"):
        patch.install()

    assert (applied, patch.installed, Library.__dict__["call"]) == ([], False, original)


def test_installs_are_counted_and_the_last_uninstall_restores_the_library() -> None:
    class Library:
        def call(self) -> str:
            return "library"

    original = Library.__dict__["call"]
    cleaned: list[bool] = []
    patch = Patch(
        "counted",
        WrittenFor("moto", "5.2.1"),
        lambda replace: (replace(Library, "call", lambda self: "patched"), replace(Library, "added", 1)),
        cleanup=lambda: cleaned.append(True),
    )

    patch.install()
    patch.install()  # a nested user: a test's moto session inside a running local server
    patch.uninstall()
    assert (Library().call(), Library.added, cleaned) == ("patched", 1, [])  # type: ignore[attr-defined]
    patch.uninstall()
    patch.uninstall()  # one too many: harmless

    assert Library.__dict__["call"] is original
    assert not hasattr(Library, "added")
    assert (patch.installed, cleaned) == (False, [True])


@pytest.mark.slow
@pytest.mark.parametrize("persistent", [False, True], ids=["in-memory", "data-dir"])
def test_local_mode_leaves_every_patched_class_as_it_found_it(persistent: bool, tmp_path: Path) -> None:
    """In a process of its own: start() installs every patch, stop() puts moto and Powertools back
    (an in-process session of another suite would hold the patches installed). A persistent server
    installs the journal patches too."""
    patched = PATCHED + (JOURNAL_PATCHED if persistent else [])
    runtime = f"LocalAws(data_dir=DataDir({str(tmp_path)!r}).open())" if persistent else "LocalAws()"
    probe = textwrap.dedent(
        f"""
        import importlib, json
        from uhp_memories.local.data_dir import DataDir
        from uhp_memories.local.moto_env import LocalAws
        MISSING = object()

        def owner(module, cls):
            found = importlib.import_module(module)
            return getattr(found, cls) if cls else found

        patched = {patched!r}
        def snapshot():
            return [vars(owner(m, c)).get(a, MISSING) for m, c, a in patched]

        before = snapshot()
        local = {runtime}.start()
        during = snapshot()
        installed = sorted(type(p).__name__ if not hasattr(p, "PATCH") else p.__name__ for p in local.patches)
        local.stop()
        if local.data_dir is not None:
            local.data_dir.close(clean=True)
        after = snapshot()
        again = {runtime}.start()  # a second runtime in the same process installs them anew
        second = snapshot()
        again.stop()
        print(json.dumps({{
            "not_replaced": [name for name, b, d in zip(patched, before, during) if b is d],
            "not_restored": [name for name, b, a in zip(patched, before, after) if b is not a],
            "not_replaced_again": [name for name, b, s in zip(patched, before, second) if b is s],
            "not_restored_again": [name for name, b, a in zip(patched, before, snapshot()) if b is not a],
            "installed": installed,
        }}))
        """
    )
    answer = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert answer.returncode == 0, answer.stderr
    report = json.loads(answer.stdout.strip().splitlines()[-1])

    assert report["not_replaced"] == []  # every attribute was replaced while local mode ran...
    assert report["not_restored"] == []  # ... and is moto's or Powertools' own again after stop()
    assert report["not_replaced_again"] == []
    assert report["not_restored_again"] == []
    assert len(report["installed"]) == len(PATCH_MODULES) + (len(JOURNAL_PATCH_MODULES) if persistent else 0)


def test_a_patch_that_refuses_stops_local_mode_with_nothing_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    class Refusing:
        def install(self) -> None:
            raise PatchVersionMismatch("written for another version")

        def uninstall(self) -> None:
            calls.append("uninstall refusing")

    class Fine:
        def install(self) -> None:
            calls.append("install fine")

        def uninstall(self) -> None:
            calls.append("uninstall fine")

    with pytest.raises(PatchVersionMismatch):
        patches.install_all([Fine(), Refusing()])

    assert calls == ["install fine", "uninstall fine"]


# -- fault injection: state of the runtime -----------------------------------------------------


def test_injected_step_failures_belong_to_their_runtime() -> None:
    failing, other = LocalAws(), LocalAws()
    failing.fail_step("erase_records", 1)

    with pytest.raises(RuntimeError, match="injected failure of step erase_records"):
        failing._run_step("arn:aws:lambda:us-east-1:123456789012:function:uhp-memories-step-erase_records", {})

    assert (failing._step_faults, other._step_faults) == ({"erase_records": 0}, {})


def test_a_step_answers_as_lambda_does_and_a_failed_step_as_an_unhandled_error() -> None:
    answers: list[tuple[str, Any]] = []

    def runner(function_name: str, event: Any) -> Any:
        answers.append((function_name, event))
        if event.get("fail"):
            raise ValueError("a secret in the message")
        return {"ok": True}

    moto_lambda_steps._runners.append(runner)
    try:
        headers: dict[str, str] = {}
        assert json.loads(moto_lambda_steps._invoke(None, "step-a", None, b'{"n": 1}', {}, headers)) == {"ok": True}
        assert headers == {}
        failed = json.loads(moto_lambda_steps._invoke(None, "step-a", None, b'{"fail": true}', {}, headers))
    finally:
        moto_lambda_steps._runners.remove(runner)

    assert failed == {"errorType": "ValueError", "errorMessage": "step failed"}  # never the message itself
    assert headers == {"x-amz-function-error": "Unhandled"}
    assert answers == [("step-a", {"n": 1}), ("step-a", {"fail": True})]


# -- Powertools' request state, per thread ------------------------------------------------------


def event(path: str) -> dict[str, Any]:
    return {
        "resource": "/items/{item_id}",
        "path": path,
        "httpMethod": "GET",
        "headers": {},
        "multiValueHeaders": {},
        "queryStringParameters": None,
        "pathParameters": {"item_id": path.rsplit("/", 1)[-1]},
        "requestContext": {"stage": "local", "path": f"/local{path}", "resourcePath": "/items/{item_id}"},
        "body": None,
        "isBase64Encoded": False,
    }


def test_requests_resolved_at_once_each_see_their_own_event_while_installed() -> None:
    from aws_lambda_powertools.event_handler import APIGatewayRestResolver

    app = APIGatewayRestResolver()
    both_inside = threading.Barrier(2, timeout=10)

    @app.get("/items/<item_id>")
    def get_item(item_id: str) -> dict[str, Any]:
        both_inside.wait()  # the other request has set its event by now
        return {"asked": item_id, "event": app.current_event.path, "context": app.lambda_context}

    answers: dict[str, Any] = {}

    def resolve(item: str) -> None:
        context: Any = f"context-{item}"  # a stand-in for the Lambda context: Powertools only carries it
        answers[item] = json.loads(app.resolve(event(f"/items/{item}"), context)["body"])

    powertools_threads.install()
    try:
        threads = [threading.Thread(target=resolve, args=(item,)) for item in ("a", "b")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=20)
    finally:
        powertools_threads.uninstall()

    assert answers == {
        "a": {"asked": "a", "event": "/items/a", "context": "context-a"},
        "b": {"asked": "b", "event": "/items/b", "context": "context-b"},
    }


def test_an_app_made_while_installed_still_resolves_once_uninstalled() -> None:
    from aws_lambda_powertools.event_handler import APIGatewayRestResolver

    powertools_threads.install()
    try:
        app = APIGatewayRestResolver()
    finally:
        powertools_threads.uninstall()

    @app.get("/items/<item_id>")
    def get_item(item_id: str) -> dict[str, Any]:
        return {"asked": item_id, "event": app.current_event.path}

    if powertools_threads.PATCH.installed:
        pytest.skip("a local runtime of another suite holds the patch installed in this process")
    no_context: Any = None
    assert json.loads(app.resolve(event("/items/c"), no_context)["body"]) == {"asked": "c", "event": "/items/c"}
