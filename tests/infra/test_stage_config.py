"""Stage configuration from cdk.json, validated by StageConfig."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from infra.config import STAGES_CONTEXT_KEY, StageConfig, StageConfigError, load_stage
from infra.layout import REPO


def cdk_context() -> dict[str, Any]:
    return json.loads((REPO.root / "cdk.json").read_text())["context"]


def test_every_stage_in_cdk_json_is_valid() -> None:
    stages = cdk_context()[STAGES_CONTEXT_KEY]

    assert {"dev", "prod"} <= set(stages)
    for name in stages:
        assert load_stage({**cdk_context(), "stage": name}).name == name


def test_the_default_stage_is_dev() -> None:
    context = cdk_context()
    del context["stage"]

    assert load_stage(context).name == "dev"


def test_an_unknown_stage_names_the_known_ones() -> None:
    with pytest.raises(StageConfigError, match="dev, prod"):
        load_stage({**cdk_context(), "stage": "staging"})


def test_a_misspelled_setting_is_refused() -> None:
    context = cdk_context()
    context[STAGES_CONTEXT_KEY]["dev"]["point_in_time_recovry"] = True

    with pytest.raises(StageConfigError, match="point_in_time_recovry"):
        load_stage(context)


@pytest.mark.parametrize(
    "settings",
    [
        {"embeddings": {"model_id": "amazon.titan-embed-text-v2:0", "dimensions": 768}},
        {"search": {"dedicated_master_count": 2, "dedicated_master_type": "m7g.large.search"}},
        {"search": {"dedicated_master_count": 3}},
        {"search": {"instance_count": 3, "availability_zones": 2}},
        {"search": {"instance_type": "r7g.large"}},
        {"search": {"index_name": "Recall Index"}},
        {"search": {"index_name": "_hidden"}},
        {"log_retention_days": 31},
        {"backup_retention_days": 36},
        {"removal_policy": "snapshot"},
        {"api": {"authorizer_cache_seconds": 7200}},
        {"account": "12345"},
        {"name": "Prod"},
    ],
)
def test_inconsistent_settings_are_refused(settings: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        StageConfig.model_validate({"name": "x", **settings})


def test_other_embedding_models_choose_their_dimensions() -> None:
    config = StageConfig.model_validate(
        {"name": "x", "embeddings": {"model_id": "cohere.embed-english-v3", "dimensions": 1024}}
    )

    assert config.embeddings.dimensions == 1024


def test_the_erase_report_settings_follow_the_stage() -> None:
    small = StageConfig.model_validate({"name": "s", "point_in_time_recovery": False, "search": {"enabled": False}})
    large = StageConfig(name="l", backup_retention_days=7)

    assert small.data_protection_environment(stream=True) == {
        "UHP_STAGE": "s",
        "UHP_PITR_ENABLED": "false",
        "UHP_PITR_RETENTION_DAYS": "0",
        "UHP_STREAM_ENABLED": "true",
        "UHP_SEARCH_SNAPSHOT_RETENTION_DAYS": "0",
    }
    assert large.data_protection_environment(stream=False)["UHP_PITR_RETENTION_DAYS"] == "7"
    assert large.data_protection_environment(stream=False)["UHP_SEARCH_SNAPSHOT_RETENTION_DAYS"] == "14"


def test_the_settings_read_what_the_stack_sets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The names CDK sets are the names uhp_memories.settings reads."""
    from uhp_memories.settings import Settings

    for name, value in StageConfig(name="p", backup_retention_days=9).data_protection_environment(stream=True).items():
        monkeypatch.setenv(name, value)
    settings = Settings.from_env()

    assert (
        settings.pitr_enabled,
        settings.pitr_retention_days,
        settings.stream_enabled,
        settings.search_snapshot_retention_days,
    ) == (True, 9, True, 14)


def test_a_calibrated_abstain_threshold_reaches_recall(monkeypatch: pytest.MonkeyPatch) -> None:
    from uhp_memories.settings import Settings

    assert "UHP_ABSTAIN_SIMILARITY" not in StageConfig(name="p").embeddings.environment()
    calibrated = StageConfig.model_validate({"name": "p", "embeddings": {"abstain_similarity": 0.37}})
    for name, value in calibrated.embeddings.environment().items():
        monkeypatch.setenv(name, value)
    assert Settings.from_env().abstain_similarity == 0.37
    with pytest.raises(ValidationError):
        StageConfig.model_validate({"name": "p", "embeddings": {"abstain_similarity": 1.5}})


def test_the_recall_index_has_a_replica_where_a_second_node_can_hold_it() -> None:
    single = StageConfig.model_validate({"name": "s"})
    multi = StageConfig.model_validate({"name": "m", "search": {"instance_count": 2, "index_name": "uhp-recall-v2"}})

    assert (single.search.index_name, single.search.replicas) == ("uhp-recall-v1", 0)
    assert (multi.search.index_name, multi.search.replicas) == ("uhp-recall-v2", 1)


MEM0_KEY = "arn:aws:kms:eu-west-1:111111111111:key/1234abcd-12ab-34cd-56ef-1234567890ab"


@pytest.mark.parametrize(
    "mem0",
    [
        {"mode": "platform"},  # no secret: the key would be nowhere
        {"mode": "platform", "api_key_secret": "arn:aws:secretsmanager:eu-west-1:111111111111:secret:mem0"},  # partial
        {"mode": "platform", "api_key_secret": "a secret with spaces"},
        {"mode": "platform", "api_key_secret": "uhp/mem0", "host": "http://mem0.example.com"},  # the key in clear
        {"mode": "platform", "api_key_secret": "uhp/mem0", "api_key_kms_key_arn": "alias/mine"},
        {"mode": "none", "api_key_secret": "uhp/mem0"},
        {"mode": "zep"},
    ],
)
def test_an_incomplete_or_inconsistent_mem0_connection_is_refused(mem0: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        StageConfig.model_validate({"name": "x", "mem0": mem0})


def test_mem0_oss_is_refused_on_a_deployed_stage_saying_why_and_what_to_use() -> None:
    context = cdk_context()
    context[STAGES_CONTEXT_KEY]["dev"]["mem0"] = {"mode": "oss"}

    with pytest.raises(StageConfigError, match="oss is not supported on a deployed stage yet") as refused:
        load_stage(context)
    assert "SQLite" in str(refused.value)
    assert "mode platform" in str(refused.value)


def test_a_stage_connects_mem0_by_the_secrets_name_or_complete_arn(monkeypatch: pytest.MonkeyPatch) -> None:
    from uhp_memories.settings import Settings

    assert StageConfig(name="p").mem0.connects is False
    by_name = StageConfig.model_validate({"name": "p", "mem0": {
        "mode": "platform", "api_key_secret": "uhp-memories/mem0", "api_key_kms_key_arn": MEM0_KEY}})
    by_arn = StageConfig.model_validate({"name": "p", "mem0": {
        "mode": "platform", "api_key_secret": "arn:aws:secretsmanager:eu-west-1:111111111111:secret:mem0-AbCdEf",
        "host": "https://mem0.example.com"}})

    assert (by_name.mem0.secret_is_arn, by_arn.mem0.secret_is_arn) == (False, True)
    assert by_name.mem0.declared_environment() == {"UHP_MEM0": "platform"}
    for name, value in by_arn.mem0.connect_environment().items():
        monkeypatch.setenv(name, value)
    settings = Settings.from_env()
    assert (settings.mem0, settings.mem0_api_key_secret, settings.mem0_host) == (
        "platform", "arn:aws:secretsmanager:eu-west-1:111111111111:secret:mem0-AbCdEf", "https://mem0.example.com")
