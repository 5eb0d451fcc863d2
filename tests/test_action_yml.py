"""action.yml: the composite action's inputs map onto the variables `bot action` reads,
and no `run:` script expands an expression (untrusted text never reaches a shell)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from bot.config.env import ENV_OVERRIDES, ENV_SECRETS

ROOT = Path(__file__).resolve().parent.parent
ACTION = ROOT / "action.yml"
EXPRESSION = re.compile(r"\$\{\{")
INPUTS = {
    "llm_provider", "llm_base_url", "llm_model", "llm_api_key", "config", "trigger_label",
    "command_prefix", "github_token", "app_id", "app_private_key", "max_cost",
    "state_retention_days", "allow_kernel_change",
}  # fmt: skip
OUTPUTS = {"conclusion", "branch", "change_request_url", "tokens", "cost"}
READ_BY_THE_BOT = set(ENV_OVERRIDES) | set(ENV_SECRETS) | {"LLM_API_KEY", "BOT_CONFIG"}


def action() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    return data


def expanding_runs(data: dict[str, Any]) -> list[str]:
    """The steps whose `run:` script holds a `${{ }}` expression (of anything: an input
    or an output may carry event data as well as `github.event` does)."""
    return [
        str(step.get("name") or step.get("id") or index)
        for index, step in enumerate(data["runs"]["steps"])
        if "run" in step and EXPRESSION.search(str(step["run"]))
    ]


def test_no_run_step_expands_an_expression() -> None:
    data = action()
    assert data["runs"]["using"] == "composite"
    assert [step for step in data["runs"]["steps"] if "run" in step]  # there are scripts to check
    assert expanding_runs(data) == []


def test_the_check_finds_an_expression_in_a_run_step() -> None:
    """The guard itself, on a planted step of the kind it exists to catch."""
    planted = action()
    planted["runs"]["steps"].append(
        {"name": "greet", "shell": "bash", "run": 'echo "${{ github.event.issue.title }}"'}
    )
    planted["runs"]["steps"].append(
        {"name": "fine", "shell": "bash", "env": {"T": "${{ github.event.issue.title }}"},
         "run": 'echo "$T"'}
    )  # fmt: skip
    assert expanding_runs(planted) == ["greet"]


def test_inputs_and_outputs_are_the_documented_ones() -> None:
    data = action()
    assert set(data["inputs"]) == INPUTS
    assert set(data["outputs"]) == OUTPUTS
    assert data["inputs"]["github_token"]["default"] == "${{ github.token }}"
    for name, spec in data["outputs"].items():
        assert spec["value"] == f"${{{{ steps.bot.outputs.{name} }}}}"


def test_the_bot_step_maps_inputs_onto_the_servers_variable_names() -> None:
    [step] = [s for s in action()["runs"]["steps"] if s.get("id") == "bot"]
    assert step["run"].strip().strip("'").endswith('bin/bot" action')
    env = step["env"]
    assert set(env) <= READ_BY_THE_BOT, set(env) - READ_BY_THE_BOT
    assert env["LLM_API_KEY"] == "${{ inputs.llm_api_key }}"
    assert env["GITHUB_PRIVATE_KEY"] == "${{ inputs.app_private_key }}"
    assert all(re.fullmatch(r"\$\{\{ inputs\.\w+ \}\}", value) for value in env.values())


def test_the_state_is_uploaded_whatever_the_run_ended_in() -> None:
    [upload] = [s for s in action()["runs"]["steps"] if "upload-artifact" in s.get("uses", "")]
    assert upload["if"].startswith("always()")
    assert upload["with"]["name"] == "${{ steps.bot.outputs.state_artifact }}"
    assert upload["with"]["path"] == "${{ steps.bot.outputs.state_dir }}"
    assert upload["with"]["include-hidden-files"] is True


def test_the_sandbox_script_exists_and_parses() -> None:
    script = ROOT / "deploy" / "github-action" / "prepare-sandbox.sh"
    prepare, restore = [
        s for s in action()["runs"]["steps"] if "prepare-sandbox.sh" in s.get("run", "")
    ]
    assert "$GITHUB_ACTION_PATH/deploy/github-action/prepare-sandbox.sh" in prepare["run"]
    assert prepare["env"] == {
        "CODING_AGENT_ALLOW_KERNEL_CHANGE": "${{ inputs.allow_kernel_change }}"
    }
    assert restore["run"].endswith('prepare-sandbox.sh" --restore')
    assert restore["if"] == "always()"  # a failed or cancelled job puts the setting back too
    assert os.access(script, os.X_OK)
    subprocess.run(["bash", "-n", str(script)], check=True)
    assert "apparmor_restrict_unprivileged_userns" in script.read_text(encoding="utf-8")
