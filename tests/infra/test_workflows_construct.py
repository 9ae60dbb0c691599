"""The workflows construct alone: every *.asl.json present becomes a state machine, none when there
are none, and a definition naming an unknown step fails the synth."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("aws_cdk", reason="the infra extra (aws-cdk-lib, cdk-nag) is not installed")

from aws_cdk import App, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from infra.config import StageConfig
from infra.constructs.workflows import UnknownStep, Workflows, state_machine_env_var

CONFIG = StageConfig(name="t")


def definition(*resources: str) -> str:
    states: dict[str, Any] = {}
    for i, resource in enumerate(resources):
        states[f"S{i}"] = {
            "Type": "Task",
            "Resource": resource,
            **({"Next": f"S{i + 1}"} if i + 1 < len(resources) else {"End": True}),
        }
    return json.dumps({"StartAt": "S0", "States": states})


def build(workflows_dir: Path, step_names: tuple[str, ...] = ("StepA", "StepB")) -> tuple[Template, Workflows, dict]:
    stack = Stack(App(), "T")
    steps = {
        name: SimpleNamespace(
            function=lambda_.Function(
                stack,
                name,
                runtime=lambda_.Runtime.PYTHON_3_13,
                handler="h.handler",
                code=lambda_.Code.from_inline("def handler(e, c): return e"),
            )
        )
        for name in step_names
    }
    workflows = Workflows(
        stack,
        "Workflows",
        config=CONFIG,
        workflows_dir=workflows_dir,
        steps=steps,  # type: ignore[arg-type]
        names={"first.asl.json": "one"},
    )
    return Template.from_stack(stack), workflows, steps


def test_no_folder_means_no_state_machines(tmp_path: Path) -> None:
    template, workflows, _ = build(tmp_path / "absent")

    template.resource_count_is("AWS::StepFunctions::StateMachine", 0)
    assert workflows.state_machines == {}


def test_an_empty_folder_means_no_state_machines(tmp_path: Path) -> None:
    template, _, _ = build(tmp_path)

    template.resource_count_is("AWS::StepFunctions::StateMachine", 0)


def test_each_definition_file_becomes_a_state_machine_with_its_steps(tmp_path: Path) -> None:
    (tmp_path / "first.asl.json").write_text(definition("${StepA}", "${StepB}"))
    (tmp_path / "second.asl.json").write_text(definition("${StepB}"))
    (tmp_path / "notes.json").write_text("{}")

    template, workflows, _ = build(tmp_path)

    assert sorted(workflows.state_machines) == ["one", "second"]
    machines = {
        m["Properties"]["StateMachineName"]: m["Properties"]
        for m in template.find_resources("AWS::StepFunctions::StateMachine").values()
    }
    assert set(machines) == {"uhp-memories-t-one", "uhp-memories-t-second"}
    assert set(machines["uhp-memories-t-one"]["DefinitionSubstitutions"]) == {"StepA", "StepB"}
    assert set(machines["uhp-memories-t-second"]["DefinitionSubstitutions"]) == {"StepB"}
    assert json.loads(machines["uhp-memories-t-second"]["DefinitionString"]) == json.loads(definition("${StepB}"))


def test_a_definition_naming_an_unknown_step_fails(tmp_path: Path) -> None:
    (tmp_path / "first.asl.json").write_text(definition("${StepA}", "${Nope}"))

    with pytest.raises(UnknownStep, match="Nope"):
        build(tmp_path)


def test_starting_an_undefined_workflow_fails(tmp_path: Path) -> None:
    _, workflows, steps = build(tmp_path)

    with pytest.raises(UnknownStep, match="erase"):
        workflows.grant_start(SimpleNamespace(name="erase", function=steps["StepA"].function), "erase")  # type: ignore[arg-type]


def test_starters_read_the_arn_the_settings_expect() -> None:
    assert state_machine_env_var("erase") == "UHP_ERASE_STATE_MACHINE_ARN"
    assert state_machine_env_var("delete") == "UHP_DELETE_STATE_MACHINE_ARN"
