"""The configuration file over the API, through the real app: a candidate checked key by
key, replaced atomically only over the version the client read, reloaded, secrets never
taken from the body."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from bot.config import load_settings, previous_config_path
from tests.e2e.test_api import AUTH, WITH_API
from tests.harness import Harness

YAML = {**AUTH, "Content-Type": "application/yaml"}


def scripted(bot: Harness) -> str:
    """The harness's model, as the file must say it for a reload to keep it."""
    return f"llm:\n  provider: scripted\n  script_path: {bot.settings.llm.script_path}\n"


async def validate(bot: Harness, text: str) -> dict[str, object]:
    answer = await bot.client.post("/api/config/validate", content=text, headers=YAML)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def keys(check: dict[str, object]) -> list[str]:
    problems = check["problems"]
    assert isinstance(problems, list)
    return [p["key"] for p in problems]


async def test_a_candidate_is_checked_key_by_key_and_its_settings_shown_masked(
    tmp_path: Path,
) -> None:
    async with Harness(tmp_path, overrides=WITH_API) as bot:
        bad = await validate(
            bot, "llm:\n  base_url: ftp://models.example\n  model: ''\ncomments:\n  languag: ja\n"
        )
        assert bad["valid"] is False and bad["settings"] is None
        assert sorted(keys(bad)) == ["comments.languag", "llm.base_url", "llm.model"]

        # Secrets stay in the environment and secret files: refused, the key named.
        for text, key in [
            ("github:\n  token: ghp_0123456789abcdef0123456789abcdef0123\n", "github.token"),
            ("llm:\n  base_url: https://me:hunter2-long-password@models.example/v1\n",
             "llm.base_url"),
            ("mcp_servers:\n  - name: docs\n    command: docs-server\n"
             "    env: {DOCS_TOKEN: abcdefgh12345678}\n", "mcp_servers.0.env.DOCS_TOKEN"),
        ]:  # fmt: skip
            refused = await validate(bot, text)
            assert refused["valid"] is False and keys(refused) == [key], text
            assert "secret" in str(refused["problems"])

        assert keys(await validate(bot, "llm: [unclosed\n")) == [""]  # the file as a whole
        bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n"
            for p, n in zip("abcdef", "bcdefg", strict=True)
        )
        assert "expand to more than" in str((await validate(bot, bomb))["problems"])

        good = await validate(bot, "labels:\n  done: finished\nserver:\n  port: 9999\n")
        assert good["valid"] is True and good["problems"] == []
        settings = good["settings"]
        assert isinstance(settings, dict)
        assert settings["labels"]["done"] == "finished"
        assert settings["github"]["token"] == "***"  # from the environment, masked
        assert good["restart_needed"] == ["server"]
        assert bot.runtime.settings.labels.done != "finished"  # only checked


async def test_put_replaces_the_file_over_the_version_read_and_reloads_it(tmp_path: Path) -> None:
    async with Harness(tmp_path, overrides=WITH_API) as bot:
        path = bot.settings.source_path
        assert path is not None and path.parent == tmp_path
        before = path.read_text()
        shown = (await bot.client.get("/api/config", headers=AUTH)).json()
        assert shown["text"] == before and shown["hash"].startswith("sha256:")
        assert shown["withheld"] is None and shown["settings"]["github"]["token"] == "***"

        candidate = scripted(bot) + "labels:\n  done: finished\n"
        no_hash = await bot.client.put("/api/config", content=candidate, headers=YAML)
        assert no_hash.status_code == 422
        assert no_hash.json()["detail"][0]["loc"] == ["header", "if_match"]
        stale = await bot.client.put(
            "/api/config", content=candidate, headers={**YAML, "If-Match": '"sha256:0"'}
        )
        assert stale.status_code == 409 and "changed since it was read" in stale.json()["detail"]
        matching = {**YAML, "If-Match": f'"{shown["hash"]}"'}
        invalid = await bot.client.put(
            "/api/config", content=candidate + "worker:\n  max_workrs: 2\n", headers=matching
        )
        assert invalid.status_code == 422
        assert [p["key"] for p in invalid.json()["problems"]] == ["worker.max_workrs"]
        secret = await bot.client.put(
            "/api/config", content=candidate + "gitlab:\n  token: glpat-abc\n", headers=matching
        )
        assert secret.status_code == 422 and secret.json()["problems"][0]["key"] == "gitlab.token"
        assert path.read_text() == before and not previous_config_path(path).exists()

        # Two clients with the same version: one replaces it, the other is told it changed.
        first, second = await asyncio.gather(
            bot.client.put("/api/config", content=candidate, headers=matching),
            bot.client.put("/api/config", content=candidate + "# mine\n", headers=matching),
        )
        assert sorted([first.status_code, second.status_code]) == [200, 409]
        saved = (first if first.status_code == 200 else second).json()
        assert path.read_text() in (candidate, candidate + "# mine\n")
        assert previous_config_path(path).read_text() == before
        assert "labels: reloaded" in saved["reload"]
        assert bot.runtime.settings.labels.done == "finished"  # applied without a restart
        assert saved["settings"]["labels"]["done"] == "finished"
        assert saved["hash"] == (await bot.client.get("/api/config", headers=AUTH)).json()["hash"]
        assert not [p for p in os.listdir(tmp_path) if p.startswith(".config.yaml.")]


async def test_a_file_holding_a_secret_is_not_shown(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "mcp_servers:\n  - name: docs\n    command: docs-server\n"
        "    env: {DOCS_TOKEN: abcdefgh12345678}\n"
    )
    async with Harness(tmp_path, overrides=WITH_API) as bot:
        shown = (await bot.client.get("/api/config", headers=AUTH)).json()
        assert shown["text"] is None and "mcp_servers.0.env.DOCS_TOKEN" in shown["withheld"]
        assert "abcdefgh12345678" not in str(shown)


async def test_a_candidate_names_no_secret_source_the_running_bot_does_not_use(
    tmp_path: Path,
) -> None:
    """Before anything is read: whether the file or variable exists is not told either."""
    elsewhere = tmp_path / "elsewhere.pem"
    elsewhere.write_text("not-for-the-api")
    async with Harness(tmp_path, overrides=WITH_API) as bot:
        for text, key in [
            (f"github:\n  private_key_path: {elsewhere}\n", "github.private_key_path"),
            ("gitlab:\n  token_file: /nowhere/at/all\n", "gitlab.token_file"),
            ("gitlab:\n  webhook_secrets:\n    grp:\n      env: NO_SUCH_VARIABLE_HERE\n",
             "gitlab.webhook_secrets.grp.env"),
            ("gitlab:\n  webhook_secrets:\n    grp:\n      env: GITHUB_TOKEN\n",
             "gitlab.webhook_secrets.grp.env"),
        ]:  # fmt: skip
            refused = await validate(bot, text)
            assert refused["valid"] is False and keys(refused) == [key], refused
            message = str(refused["problems"])
            assert "change it in the file on the host" in message
            assert "not set" not in message and "cannot read" not in message


HOST_ONLY_CHANGES = {
    "mcp_servers:\n  - name: docs\n    command: docs-server\n": ["mcp_servers"],
    "sandbox:\n  network: true\n  egress_allow: ['*']\n": [
        "sandbox.network",
        "sandbox.egress_allow",
    ],
    "planning:\n  security:\n    require_approval_paths: []\n": [
        "planning.security.require_approval_paths"
    ],
    "planning:\n  user_config_api:\n    enabled: true\n    url: https://x.example/{user}\n": [
        "planning.user_config_api.enabled",
        "planning.user_config_api.url",
    ],
    "github:\n  api_url: https://github.evil.example/api/v3\n": ["github.api_url"],
    "gitlab:\n  url: https://gitlab.evil.example\n": ["gitlab.url"],
    "server:\n  forwarded_allow_ips: [0.0.0.0/0]\n": ["server.forwarded_allow_ips"],
    "storage:\n  data_dir: /tmp/elsewhere\n": ["storage.data_dir"],
    "web:\n  fetch:\n    enabled: true\n    allowed_domains: ['*']\n": [
        "web.fetch.enabled",
        "web.fetch.allowed_domains",
    ],
    "observability:\n  traces:\n    endpoint: https://collector.evil.example\n": [
        "observability.traces.endpoint"
    ],
    "eval:\n  runs_dir: /etc\n": ["eval.runs_dir"],  # the pages would read a folder of it
}


async def test_put_refuses_what_only_the_file_on_the_host_may_change(tmp_path: Path) -> None:
    """The API token tunes the bot; it cannot widen what commands may do nor send a
    credential elsewhere: each such key named, the file left as it was."""
    async with Harness(tmp_path, overrides=WITH_API) as bot:
        path = bot.settings.source_path
        assert path is not None
        before = path.read_text()
        shown = (await bot.client.get("/api/config", headers=AUTH)).json()
        matching = {**YAML, "If-Match": f'"{shown["hash"]}"'}
        base = scripted(bot)
        llm_elsewhere = base.replace("provider: scripted", "provider: openai") + (
            "  base_url: https://models.evil.example/v1\n"
        )
        cases = {**{base + k: v for k, v in HOST_ONLY_CHANGES.items()},
                 llm_elsewhere: ["llm.provider", "llm.base_url"]}  # fmt: skip
        for candidate, named in cases.items():
            check = await validate(bot, candidate)
            assert check["valid"] is True, check
            refused_keys = [p["key"] for p in check["refused_by_put"]]  # type: ignore[attr-defined]
            assert refused_keys == named, candidate
            answer = await bot.client.put("/api/config", content=candidate, headers=matching)
            assert answer.status_code == 403, (candidate, answer.text)
            body = answer.json()
            assert "change it in the file on the host" in body["detail"]
            assert [p["key"] for p in body["problems"]] == named
            assert path.read_text() == before and not previous_config_path(path).exists()

        kept = await validate(bot, base + "labels:\n  done: finished\n")
        assert kept["valid"] is True and kept["refused_by_put"] == []
        saved = await bot.client.put(
            "/api/config", content=base + "labels:\n  done: finished\n", headers=matching
        )
        assert saved.status_code == 200, saved.text


async def test_an_environment_override_does_not_hide_a_host_only_change(tmp_path: Path) -> None:
    """LLM_BASE_URL sets llm.base_url over the file; a candidate changing the file's value
    is still refused (the file would send the key there once the variable is gone)."""
    from bot.api.config_file import ConfigApi
    from bot.api.models import ConfigText
    from bot.config import load_settings

    config = tmp_path / "config.yaml"
    config.write_text("labels:\n  done: finished\n")
    environ = {"LLM_BASE_URL": "http://127.0.0.1:9/v1", "BOT_DATA_DIR": str(tmp_path / "d")}
    running = load_settings(environ, config)
    api = ConfigApi(settings=lambda: running, environ=environ, reload=list)
    text = "labels:\n  done: finished\nllm:\n  base_url: https://models.evil.example/v1\n"
    check = await api.validate_config(ConfigText(text=text))
    assert check.valid and check.settings is not None
    assert check.settings["llm"]["base_url"] == "http://127.0.0.1:9/v1"  # the override wins
    assert [p.key for p in check.refused_by_put] == ["llm.base_url"]
    same = await api.validate_config(ConfigText(text="labels:\n  done: done\n"))
    assert same.refused_by_put == []


async def test_a_candidate_over_256_kib_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    """Counted in bytes: 150,000 two-byte characters are fewer characters than the body's
    bound but 300,000 bytes of YAML to parse."""
    async with Harness(tmp_path, overrides=WITH_API) as bot:
        wide = "labels:\n  done: finished\n# " + "é" * 150_000 + "\n"
        refused = await validate(bot, wide)
        assert refused["valid"] is False and keys(refused) == [""], refused
        assert "262144" in str(refused["problems"])
        assert (await validate(bot, "labels:\n  done: finished\n# " + "é" * 1000 + "\n"))["valid"]
        # A value YAML cannot build (a date with month 13): a problem, not an error.
        assert keys(await validate(bot, "labels:\n  done: 2001-13-45\n")) == [""]


async def test_a_candidate_loading_only_with_the_environment_cannot_hide_a_host_only_change(
    tmp_path: Path,
) -> None:
    """Issue 27: GITHUB_API_URL and LLM_PROVIDER override the file. A candidate that
    points github.api_url elsewhere and is valid only with LLM_PROVIDER's help (a
    scripted model without a script) was compared with the environment merged in, where
    the override hid the new URL: the file kept it for the day the variable goes. It is
    compared with the file as written, whatever the environment sets."""
    async with Harness(tmp_path, overrides=WITH_API) as bot:
        bot.env.update({"GITHUB_API_URL": "https://ghe.example/api/v3", "LLM_PROVIDER": "openai"})
        path = bot.settings.source_path
        assert path is not None
        before = path.read_text()
        shown = (await bot.client.get("/api/config", headers=AUTH)).json()
        candidate = (
            "github:\n  api_url: https://github.evil.example/api/v3\nllm:\n  provider: scripted\n"
        )
        check = await validate(bot, candidate)
        assert check["valid"] is True, check
        refused = [p["key"] for p in check["refused_by_put"]]  # type: ignore[attr-defined]
        assert refused == ["github.api_url", "llm.script_path"], check
        answer = await bot.client.put(
            "/api/config", content=candidate, headers={**YAML, "If-Match": shown["hash"]}
        )
        assert answer.status_code == 403, answer.text
        assert path.read_text() == before


async def test_the_bot_accounts_are_host_only(tmp_path: Path) -> None:
    """Issue 27: who the bot is decides whose comments and checks are its own."""
    async with Harness(tmp_path, overrides=WITH_API) as bot:
        shown = (await bot.client.get("/api/config", headers=AUTH)).json()
        candidate = scripted(bot) + "bot:\n  github_login: alice\n  gitlab_username: alice\n"
        answer = await bot.client.put(
            "/api/config", content=candidate, headers={**YAML, "If-Match": shown["hash"]}
        )
        assert answer.status_code == 403, answer.text
        assert [p["key"] for p in answer.json()["problems"]] == [
            "bot.github_login",
            "bot.gitlab_username",
        ]


async def test_what_put_accepts_starts_the_bot(tmp_path: Path) -> None:
    """Issue 27: a tab after a colon is a value to libyaml and an error to pure-Python
    PyYAML. The check and the start-up parse with the same function: what PUT accepts,
    the next start loads, with the same values."""
    async with Harness(tmp_path, overrides=WITH_API) as bot:
        path = bot.settings.source_path
        assert path is not None
        shown = (await bot.client.get("/api/config", headers=AUTH)).json()
        candidate = scripted(bot) + "labels:\n  done:\tfinished\n"
        answer = await bot.client.put(
            "/api/config", content=candidate, headers={**YAML, "If-Match": shown["hash"]}
        )
        if answer.status_code == 200:
            restarted = load_settings(bot.env, path)
            assert restarted.labels.done == "finished"
        else:  # refused as the start-up would refuse it, the file left alone
            assert answer.status_code == 422, answer.text
            assert path.read_text() != candidate
