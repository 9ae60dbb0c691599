"""A stage that connects mem0's Platform (cdk.json `mem0`, infra/config.py Mem0Config): the functions that
reach mem0's records (infra/catalog.py `mem0="connect"`) get its settings, mem0's library (the mem0
dependencies layer) and the Platform key's secret, and no other function does; those that only say which
providers the stage offers (`declare`) get `UHP_MEM0` alone. What the template gives a function is then
what the server connects with: its environment, read by uhp_memories.settings, reads the key from the
secret it names and reaches the Platform (a loopback stand-in) with it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aws_cdk", reason="the infra extra (aws-cdk-lib, cdk-nag) is not installed")

from infra.catalog import FUNCTION_ACCESS
from infra.constructs.mem0 import LIBRARY_ENVIRONMENT
from infra.layout import REPO
from tests.infra.conftest import Synth, render, synthesize
from tests.infra.test_stack import environment, expected_permissions, lambda_id, permissions

KEY_ARN = "arn:aws:kms:eu-west-1:111111111111:key/1234abcd-12ab-34cd-56ef-1234567890ab"
SECRET_ARN = "arn:aws:secretsmanager:eu-west-1:111111111111:secret:uhp-memories/mem0-AbCdEf"
VARIANTS: dict[str, dict[str, Any]] = {
    # By name, encrypted with the operator's own key.
    "by-name": {"mode": "platform", "api_key_secret": "uhp-memories/mem0-api-key", "api_key_kms_key_arn": KEY_ARN},
    # By complete ARN, at another host, on a stage with its own KMS key.
    "by-arn": {"mode": "platform", "api_key_secret": SECRET_ARN, "host": "https://mem0.example.com"},
}
CONNECTING = {name for name, access in FUNCTION_ACCESS.items() if access.mem0 == "connect"}
DECLARING = {name for name, access in FUNCTION_ACCESS.items() if access.mem0 == "declare"}
MEM0_ENV = {"UHP_MEM0", "UHP_MEM0_API_KEY_SECRET", "UHP_MEM0_HOST", "UHP_MEM0_FOLDER", "UHP_MEM0_INFER",
            "UHP_MEM0_API_KEY", *LIBRARY_ENVIRONMENT}


def stage_with_mem0(clean_checkout: Path, root: Path, name: str, mem0: dict[str, Any], **more: Any) -> Path:
    """A copy of the checkout whose cdk.json has one more stage: dev, connected to mem0 as given."""
    shutil.copytree(clean_checkout, root)
    cdk = json.loads((root / "cdk.json").read_text())
    stages = cdk["context"]["uhp-memories:stages"]
    stages[name] = {**stages["dev"], "mem0": mem0, **more}
    (root / "cdk.json").write_text(json.dumps(cdk))
    return root


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def mem0_stage(request: pytest.FixtureRequest, clean_checkout: Path, tmp_path_factory: pytest.TempPathFactory
               ) -> Synth:
    more = {"encryption": {"customer_managed_key": True}} if request.param == "by-arn" else {}
    root = stage_with_mem0(clean_checkout, tmp_path_factory.mktemp(f"mem0-{request.param}") / "repo",
                           request.param, VARIANTS[request.param], **more)
    return synthesize(root, request.param, tmp_path_factory.mktemp(f"cdk-mem0-{request.param}"))


def layer_ids(synth: Synth, name: str) -> set[str]:
    return {render(layer).strip("<>") for layer in synth.resources[lambda_id(synth, name)]["Properties"]["Layers"]}


def layers_described(synth: Synth, text: str) -> set[str]:
    return {n for n, layer in synth.of_type("AWS::Lambda::LayerVersion").items()
            if text in layer["Properties"]["Description"]}


def secret_grants(synth: Synth, name: str) -> set[tuple[str, str]]:
    return {(a, r) for a, r in permissions(synth, lambda_id(synth, name)) if a.startswith(("secretsmanager:", "kms:"))
            and not r.startswith("<Encryption")}


def decrypt_conditions(synth: Synth, name: str) -> list[Any]:
    role = synth.resources[lambda_id(synth, name)]["Properties"]["Role"]["Fn::GetAtt"][0]
    return [statement.get("Condition") for policy in synth.of_type("AWS::IAM::Policy").values()
            if {"Ref": role} in policy["Properties"]["Roles"]
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
            if statement["Action"] == "kms:Decrypt" and statement["Resource"] == KEY_ARN]


def test_the_catalog_connects_the_functions_that_reach_records_and_declares_to_those_that_only_name_providers(
) -> None:
    assert {"records", "recall", "observe", "erase", "harnesses", "mcp", "steps.purge_subtree"} == CONNECTING
    assert {"discovery", "memories"} == DECLARING


def test_cdk_nag_finds_nothing_on_a_stage_that_connects_mem0(mem0_stage: Synth) -> None:
    assert mem0_stage.nag_error is None, mem0_stage.violations()
    assert mem0_stage.violations() == []


def test_only_the_connecting_functions_get_mem0s_settings_and_library_environment(mem0_stage: Synth) -> None:
    config = mem0_stage.stack.config.mem0
    for name, access in FUNCTION_ACCESS.items():
        env = environment(mem0_stage, name)
        mine = {k: v for k, v in env.items() if k in MEM0_ENV}
        if access.mem0 == "connect":
            expected = {"UHP_MEM0": "platform", "UHP_MEM0_API_KEY_SECRET": config.api_key_secret, **LIBRARY_ENVIRONMENT}
            if config.host:
                expected["UHP_MEM0_HOST"] = config.host
            assert mine == expected, name
        elif access.mem0 == "declare":
            assert mine == {"UHP_MEM0": "platform"}, name  # what it offers, never where its key is
        else:
            assert mine == {}, name
    # The only place Lambda lets mem0 make its home folder (it makes one when first imported).
    assert LIBRARY_ENVIRONMENT["MEM0_DIR"].startswith("/tmp/")


def test_only_the_connecting_roles_may_read_the_secret_and_decrypt_it(mem0_stage: Synth) -> None:
    config = mem0_stage.stack.config.mem0
    secret = (SECRET_ARN if config.secret_is_arn else
              f"arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:{config.api_key_secret}-??????")
    for name, access in FUNCTION_ACCESS.items():
        granted = secret_grants(mem0_stage, name)
        if access.mem0 == "connect":
            expected = {("secretsmanager:GetSecretValue", secret)}
            if config.api_key_kms_key_arn:
                expected.add(("kms:Decrypt", KEY_ARN))
                (condition,) = decrypt_conditions(mem0_stage, name)  # only through Secrets Manager
                via = render(condition["StringEquals"]["kms:ViaService"])
                assert via == "secretsmanager.<AWS::Region>.amazonaws.com"
            assert granted == expected, name
        else:
            assert granted == set(), name


def test_every_role_is_otherwise_what_the_same_stage_without_mem0_grants(mem0_stage: Synth) -> None:
    """(The stage key's own grants, by-arn's, are held elsewhere: tests/infra/test_stack.py.)"""
    for name, access in FUNCTION_ACCESS.items():
        granted = permissions(mem0_stage, lambda_id(mem0_stage, name)) - secret_grants(mem0_stage, name)
        rest = {(a, r) for a, r in granted if not r.startswith("<EncryptionKey")}
        assert rest == expected_permissions(mem0_stage, name, access), name


def test_the_mem0_layer_replaces_the_dependencies_layer_for_the_connecting_functions_only(mem0_stage: Synth) -> None:
    (mem0_layer,) = layers_described(mem0_stage, "mem0-layer-requirements.txt")
    (dependencies,) = layers_described(mem0_stage, "(infra/layer-requirements.txt)")
    (core,) = layers_described(mem0_stage, "core package")
    for name, access in FUNCTION_ACCESS.items():
        expected = {mem0_layer, core} if access.mem0 == "connect" else {dependencies, core}
        assert layer_ids(mem0_stage, name) == expected, name
    assert mem0_stage.stack.packaging.mem0_dependencies_layer is not None


def test_a_stage_without_mem0_has_no_mem0_layer_setting_or_grant(dev: Synth, prod: Synth) -> None:
    for synth in (dev, prod):
        assert synth.stack.config.mem0.mode == "none"
        assert layers_described(synth, "mem0") == set()
        assert synth.stack.packaging.mem0_dependencies_layer is None
        for name in FUNCTION_ACCESS:
            assert not MEM0_ENV & set(environment(synth, name)), name


# -- what the template gives a function is what the server connects with --------------------------------


class Secrets:
    """Secrets Manager as a function's boto3 session reaches it: one secret, and every id it was asked for."""

    def __init__(self, secret_id: str, value: str) -> None:
        self.secret_id, self.value = secret_id, value
        self.asked: list[str] = []

    def client(self, service: str, region_name: str) -> Secrets:
        assert service == "secretsmanager"
        return self

    def get_secret_value(self, SecretId: str) -> dict[str, str]:  # boto3's parameter name
        self.asked.append(SecretId)
        if SecretId != self.secret_id:
            raise LookupError(f"ResourceNotFoundException: {SecretId}")
        return {"SecretString": self.value}


@pytest.mark.slow
def test_a_connecting_function_reads_the_key_from_the_secret_the_stage_names_and_reaches_the_platform_with_it(
    mem0_stage: Synth, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("mem0", reason="the mem0 extra (mem0ai) is not installed")
    from tests.fakes.mem0_platform import FakePlatform
    from uhp_memories import bootstrap
    from uhp_memories.domain.memories.model import Memory
    from uhp_memories.settings import Settings

    env = environment(mem0_stage, "records")
    secrets = Secrets(env["UHP_MEM0_API_KEY_SECRET"], "m0-key-from-secrets-manager")
    with FakePlatform() as platform:
        # The function's environment as the template gives it, but at the stand-in's address, and mem0's home
        # in this test's folder rather than this machine's /tmp.
        for name, value in {**env, "UHP_MEM0_HOST": platform.url, "MEM0_DIR": str(tmp_path / "mem0")}.items():
            monkeypatch.setenv(name, str(value))
        settings = Settings.from_env()
        assert (settings.mem0, settings.mem0_api_key) == ("platform", "")  # never the key itself
        providers = bootstrap.build_providers(settings, lambda: None, session=secrets)
        assert secrets.asked == []  # nothing is read before a call reaches mem0
        memory = Memory("acme", "hmem_" + "0" * 32, "Kept by mem0", "", None, False, "mem0", "user:alice", 1, 1)
        (provider,) = providers.connected()

        assert list(provider.scan(memory, "all", None)) == []
        assert secrets.asked == [env["UHP_MEM0_API_KEY_SECRET"]]
        assert {headers["authorization"] for _, _, headers, _ in platform.requests} == {
            "Token m0-key-from-secrets-manager"}


@pytest.mark.slow
def test_a_declaring_function_describes_mem0_without_its_library_or_key(
    mem0_stage: Synth, monkeypatch: pytest.MonkeyPatch
) -> None:
    """discovery lists mem0's capability document, and memories creates memories in it, from `UHP_MEM0`
    alone: nothing is imported of mem0's library (it is not in their layer) and no secret is read."""
    env = environment(mem0_stage, "discovery")
    script = textwrap.dedent("""
        import importlib.abc, json, sys
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "mem0" or name.startswith("mem0."):
                    raise ImportError(f"a declaring function imported {name}")
        sys.meta_path.insert(0, Block())
        from uhp_memories import bootstrap
        from uhp_memories.settings import Settings

        class NoSecrets:
            def client(self, *args, **kwargs):
                raise AssertionError("a declaring function read a secret")

        providers = bootstrap.build_providers(Settings.from_env(), lambda: None, session=NoSecrets())
        (mem0,) = providers.connected()
        print(json.dumps({"ids": providers.ids, "capabilities": mem0.capabilities(), "outside": mem0.is_outside()}))
    """)
    variables = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO.root), **{k: str(v) for k, v in env.items()}}
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO.root, env=variables, capture_output=True,
                            text=True, timeout=120)

    assert result.returncode == 0, result.stderr[-3000:]
    answer = json.loads(result.stdout)
    assert answer["ids"] == ["native", "mem0"]
    assert answer["capabilities"]["mode"] == "platform"
    assert answer["capabilities"]["erase"]["history"] == "unreachable"  # the Platform keeps it
    assert answer["outside"] is True  # attaching such a memory tells the person its turns leave the server


@pytest.mark.slow
@pytest.mark.parametrize("with_mem0_dir", [True, False])
def test_mem0s_library_imports_where_home_cannot_be_written_only_with_mem0_dir(tmp_path: Path, with_mem0_dir: bool
                                                                               ) -> None:
    """Lambda's file system is read-only outside /tmp, and mem0 makes ~/.mem0 when first imported: without
    MEM0_DIR (LIBRARY_ENVIRONMENT) the import fails, so every call reaching mem0 would."""
    pytest.importorskip("mem0", reason="the mem0 extra (mem0ai) is not installed")
    (tmp_path / "not-a-folder").write_text("")
    variables = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "not-a-folder" / "home"), "MEM0_TELEMETRY": "False"}
    if with_mem0_dir:
        variables["MEM0_DIR"] = str(tmp_path / "mem0")
    result = subprocess.run([sys.executable, "-c", "import mem0; print(mem0.MemoryClient.__name__)"],
                            env=variables, capture_output=True, text=True, timeout=120)

    assert (result.returncode == 0) == with_mem0_dir, result.stderr[-2000:]
