from pathlib import Path

import pytest

from bot.config import (
    ConfigError,
    Settings,
    disabled_forges,
    load_settings,
    masked,
    secret_values,
)

REPO_CONFIG = Path(__file__).resolve().parent.parent / "config.yaml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_repository_config_yaml_equals_the_built_in_defaults() -> None:
    loaded = load_settings({}, REPO_CONFIG)
    defaults = Settings()
    assert loaded.model_dump(exclude={"source_path"}) == defaults.model_dump(
        exclude={"source_path"}
    )


def test_repository_config_holds_the_planning_keys_of_the_specification() -> None:
    import yaml

    raw = yaml.safe_load(REPO_CONFIG.read_text())["planning"]
    assert {
        "enabled",
        "strategy",
        "max_subtasks",
        "decomposition_level",
        "auto_adjust_level",
    } <= set(raw)
    assert set(raw["reflection"]) == {
        "enabled",
        "trigger_on_error",
        "trigger_interval",
        "depth",
        "unjudged",  # ours: what to do with a result nobody could judge (10.3.1)
    }
    assert set(raw["revision"]) == {"max_revisions", "require_human_approval", "approval_timeout"}
    assert set(raw["cache"]) == {"enabled", "ttl"}
    assert set(raw["complexity_threshold"]) == {"simple", "moderate", "complex"}
    assert {"action_timeout", "total_timeout", "early_termination"} <= set(raw["execution"])
    assert set(raw["security"]) == {
        "allowed_tools",
        "forbidden_tools",
        "require_approval",
        "require_approval_paths",
    }


def test_typo_names_the_key_and_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "planning:\n  reflection:\n    trigger_intervall: 3\n")
    with pytest.raises(ConfigError) as err:
        load_settings({}, path)
    assert str(path) in str(err.value)
    assert "planning.reflection.trigger_intervall: unknown key" in str(err.value)


def test_wrong_type_and_out_of_range_are_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"server\.port"):
        load_settings({}, write(tmp_path, "server:\n  port: lots\n"))
    with pytest.raises(ConfigError, match=r"planning\.revision\.max_revisions"):
        load_settings({}, write(tmp_path, "planning:\n  revision:\n    max_revisions: -1\n"))
    with pytest.raises(ConfigError, match=r"planning\.strategy"):
        load_settings({}, write(tmp_path, "planning:\n  strategy: guess\n"))


def test_secrets_in_the_file_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "github:\n  webhook_secret: hunter2\n")
    with pytest.raises(ConfigError, match="GITHUB_WEBHOOK_SECRET"):
        load_settings({}, path)


def test_the_user_config_token_comes_only_from_the_environment(tmp_path: Path) -> None:
    inline = "planning:\n  user_config_api:\n    token: hunter2\n"
    with pytest.raises(ConfigError, match="BOT_USER_CONFIG_TOKEN"):
        load_settings({}, write(tmp_path, inline))
    s = load_settings({"BOT_USER_CONFIG_TOKEN": "ucfg-token-1"}, REPO_CONFIG)
    token = s.planning.user_config_api.token
    assert token is not None and token.get_secret_value() == "ucfg-token-1"
    assert "ucfg-token-1" in secret_values(s)
    assert masked(s)["planning"]["user_config_api"]["token"] == "***"
    assert "ucfg-token-1" not in repr(masked(s))


def test_broken_yaml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings({}, write(tmp_path, "server: [\n"))
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings({}, tmp_path / "nope.yaml")


def test_planning_environment_overrides() -> None:
    env = {
        "PLANNING_ENABLED": "false",
        "PLANNING_STRATEGY": "hierarchical",
        "PLANNING_MAX_SUBTASKS": "7",
        "REFLECTION_ENABLED": "false",
        "REFLECTION_INTERVAL": "5",
        "MAX_PLAN_REVISIONS": "2",
    }
    s = load_settings(env, REPO_CONFIG)
    assert s.planning.enabled is False
    assert s.planning.strategy == "hierarchical"
    assert s.planning.max_subtasks == 7
    assert s.planning.reflection.enabled is False
    assert s.planning.reflection.trigger_interval == 5
    assert s.planning.revision.max_revisions == 2


def test_structured_output_is_auto_unless_pinned_and_checked() -> None:
    s = load_settings({}, REPO_CONFIG)
    assert (s.llm.structured_output, s.llm.max_pause_interval) == ("auto", 1800)
    pinned = load_settings({"LLM_STRUCTURED_OUTPUT": "json_object"}, REPO_CONFIG)
    assert pinned.llm.structured_output == "json_object"
    with pytest.raises(ConfigError, match=r"llm\.structured_output"):
        load_settings({"LLM_STRUCTURED_OUTPUT": "grammar"}, REPO_CONFIG)


def test_bad_environment_value_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"planning\.max_subtasks"):
        load_settings({"PLANNING_MAX_SUBTASKS": "many"}, REPO_CONFIG)


def test_secrets_and_urls_from_the_environment(tmp_path: Path) -> None:
    env = {
        "BOT_CONFIG": str(REPO_CONFIG),
        "BOT_DATA_DIR": str(tmp_path / "data"),
        "GITHUB_APP_ID": "1234",
        "GITHUB_PRIVATE_KEY": "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----",
        "GITHUB_WEBHOOK_SECRET": "gh-secret",
        "GITHUB_API_URL": "https://ghe.example/api/v3",
        "GITLAB_URL": "https://gitlab.example",
        "GITLAB_TOKEN": "glpat-xxxxxxxxxxxxxxxxxxxx",
        "GITLAB_WEBHOOK_SECRET": "gl-secret",
        "LLM_PROVIDER": "anthropic",
        "LLM_BASE_URL": "https://api.anthropic.com",
        "LLM_MODEL": "claude-sonnet-4-5",
        "ANTHROPIC_API_KEY": "sk-ant-test",
    }
    s = load_settings(env)
    assert s.source_path == REPO_CONFIG
    assert s.data_dir == tmp_path / "data"
    assert s.github.enabled and s.gitlab.enabled
    assert s.github.api_url == "https://ghe.example/api/v3"
    assert s.gitlab.url == "https://gitlab.example"
    assert s.llm.provider == "anthropic" and s.llm.model == "claude-sonnet-4-5"
    assert s.llm.api_key is not None and s.llm.api_key.get_secret_value() == "sk-ant-test"
    assert disabled_forges(s) == []
    shown = masked(s)
    assert shown["github"]["webhook_secret"] == "***"
    assert shown["llm"]["api_key"] == "***"
    assert "gh-secret" not in repr(shown) and "sk-ant-test" not in repr(shown)


def test_llm_api_key_precedence() -> None:
    env = {"OPENAI_API_KEY": "sk-openai", "LLM_API_KEY": "sk-generic"}
    s = load_settings(env, REPO_CONFIG)
    assert s.llm.api_key is not None and s.llm.api_key.get_secret_value() == "sk-generic"
    s = load_settings({"OPENAI_API_KEY": "sk-openai"}, REPO_CONFIG)
    assert s.llm.api_key is not None and s.llm.api_key.get_secret_value() == "sk-openai"


def test_secret_files_named_by_the_config(tmp_path: Path) -> None:
    (tmp_path / "hook.secret").write_text("from-a-file\n")
    (tmp_path / "key.pem").write_text("PEM")
    path = write(
        tmp_path,
        "github:\n  app_id: '42'\n  webhook_secret_file: hook.secret\n"
        "  private_key_path: key.pem\n",
    )
    s = load_settings({}, path)
    assert s.github.webhook_secret is not None
    assert s.github.webhook_secret.get_secret_value() == "from-a-file"
    assert s.github.private_key is not None and s.github.private_key.get_secret_value() == "PEM"
    assert s.github.enabled
    missing = write(tmp_path, "gitlab:\n  token_file: /nonexistent/token\n")
    with pytest.raises(ConfigError, match=r"gitlab\.token_file"):
        load_settings({}, missing)


def test_no_credentials_means_disabled_forges_with_the_settings_that_enable_them() -> None:
    lines = disabled_forges(load_settings({}, REPO_CONFIG))
    assert len(lines) == 2
    assert "GITHUB_WEBHOOK_SECRET" in lines[0] and "GITHUB_APP_ID" in lines[0]
    assert "GITLAB_TOKEN" in lines[1]


def test_consistency_checks(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="BOT_POSTGRES_DSN"):
        load_settings({}, write(tmp_path, "storage:\n  backend: postgres\n"))
    with pytest.raises(ConfigError, match="script_path"):
        load_settings({}, write(tmp_path, "llm:\n  provider: scripted\n"))
    both = "mcp_servers:\n  - name: x\n    command: a\n    url: http://h\n"
    with pytest.raises(ConfigError, match="exactly one of command or url"):
        load_settings({}, write(tmp_path, both))


def test_an_empty_secret_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "hook.secret").write_text("  \n")
    path = write(tmp_path, "github:\n  webhook_secret_file: hook.secret\n")
    with pytest.raises(ConfigError, match="is empty"):
        load_settings({}, path)


def test_gitlab_webhook_secrets_per_project_or_group_from_files_or_variables(
    tmp_path: Path,
) -> None:
    (tmp_path / "payments.secret").write_text("payments-token\n")
    path = write(
        tmp_path,
        "gitlab:\n  webhook_secrets:\n"
        "    acme/payments: {file: payments.secret}\n"
        "    acme: {env: ACME_HOOK_SECRET}\n",
    )
    s = load_settings({"GITLAB_TOKEN": "glpat-x", "ACME_HOOK_SECRET": "acme-token"}, path)
    assert s.gitlab.scoped_webhook_secrets() == {
        "acme/payments": "payments-token",
        "acme": "acme-token",
    }
    assert s.gitlab.enabled and s.gitlab.webhook_secret is None  # no shared secret needed
    assert {"payments-token", "acme-token"} <= set(secret_values(s))
    shown = masked(s)["gitlab"]["webhook_secrets"]
    assert shown["acme"] == {"file": None, "env": "ACME_HOOK_SECRET", "secret": "***"}
    assert "payments-token" not in str(masked(s))


def test_gitlab_webhook_secrets_refuse_inline_missing_and_ambiguous_sources(
    tmp_path: Path,
) -> None:
    inline = write(tmp_path, "gitlab:\n  webhook_secrets:\n    acme: {secret: hunter2}\n")
    with pytest.raises(ConfigError, match=r"webhook_secrets\.acme\.secret: secrets are not"):
        load_settings({}, inline)
    unset = write(tmp_path, "gitlab:\n  webhook_secrets:\n    acme: {env: NOPE}\n")
    with pytest.raises(ConfigError, match=r"webhook_secrets\.acme\.env: .*NOPE is not set"):
        load_settings({}, unset)
    unreadable = write(tmp_path, "gitlab:\n  webhook_secrets:\n    acme: {file: /nonexistent}\n")
    with pytest.raises(ConfigError, match=r"webhook_secrets\.acme\.file: cannot read"):
        load_settings({}, unreadable)
    both = write(tmp_path, "gitlab:\n  webhook_secrets:\n    acme: {env: A, file: b}\n")
    with pytest.raises(ConfigError, match="exactly one of file or env"):
        load_settings({"A": "x"}, both)
    neither = write(tmp_path, "gitlab:\n  webhook_secrets:\n    acme: {}\n")
    with pytest.raises(ConfigError, match="exactly one of file or env"):
        load_settings({}, neither)
    not_a_map = write(tmp_path, "gitlab:\n  webhook_secrets:\n    acme: token\n")
    with pytest.raises(ConfigError, match=r"webhook_secrets\.acme: must be"):
        load_settings({}, not_a_map)


def test_the_web_tools_are_off_by_default_and_checked_when_on(tmp_path: Path) -> None:
    web = Settings().web
    assert not web.fetch.enabled and not web.search.enabled and web.fetch.allowed_domains == ()
    text = "web:\n  fetch:\n    enabled: true\n    allowed_domains: [Docs.Python.org., Bücher.ex]\n"
    loaded = load_settings({}, write(tmp_path, text))
    assert loaded.web.fetch.allowed_domains == ("docs.python.org", "xn--bcher-kva.ex")
    for bad, why in [
        ("web:\n  fetch:\n    enabled: true\n", "at least one domain"),
        ("web:\n  fetch:\n    allowed_domains: [https://x.org/]\n", "not a host name"),
        ("web:\n  fetch:\n    allowed_domains: [a..b]\n", "not a valid host name"),
        ("web:\n  fetch:\n    max_bytes: 1\n", "web.fetch.max_bytes"),
        ("web:\n  search:\n    enabled: true\n", "web.search.url must be an http"),
        ("web:\n  search:\n    provider: google\n", "web.search.provider"),
    ]:
        with pytest.raises(ConfigError, match=why):
            load_settings({}, write(tmp_path, bad))


@pytest.mark.parametrize(
    "base_url", ["127.0.0.1:11434/v1", "ftp://models.example/v1", "http://", "", "http://h:port/"]
)
def test_an_llm_base_url_that_is_not_an_http_url_is_refused_by_its_key(
    tmp_path: Path, base_url: str
) -> None:
    with pytest.raises(ConfigError, match=r"llm\.base_url: .*must be an http\(s\) URL"):
        load_settings({}, write(tmp_path, f"llm:\n  base_url: {base_url!r}\n"))
    for good in ("http://127.0.0.1:11434/v1", "https://api.openai.com/v1"):
        loaded = load_settings({}, write(tmp_path, f"llm:\n  base_url: {good}\n"))
        assert loaded.llm.base_url == good


@pytest.mark.parametrize("model", ["''", "'   '"])
def test_an_empty_llm_model_is_refused_by_its_key(tmp_path: Path, model: str) -> None:
    with pytest.raises(ConfigError, match=r"llm\.model: .*must name the model"):
        load_settings({}, write(tmp_path, f"llm:\n  model: {model}\n"))


def test_a_candidate_may_keep_the_secret_sources_the_running_settings_use(
    tmp_path: Path,
) -> None:
    from bot.config.sources import new_secret_sources

    key = tmp_path / "app.pem"
    key.write_text("k")
    config = tmp_path / "config.yaml"
    config.write_text(
        f"github:\n  private_key_path: {key}\n"
        "gitlab:\n  webhook_secrets:\n    grp: {env: GRP_SECRET}\n"
    )
    running = load_settings({"GRP_SECRET": "s"}, config)
    kept = {
        "github": {"private_key_path": str(key)},
        "gitlab": {"webhook_secrets": {"other/grp": {"env": "GRP_SECRET"}}},
    }
    assert new_secret_sources(kept, running) == []
    moved = {
        "github": {"private_key_path": str(tmp_path / "other.pem")},
        "gitlab": {"token_file": "t", "webhook_secrets": {"grp": {"env": "HOME", "file": "f"}}},
    }
    assert new_secret_sources(moved, running) == [
        "github.private_key_path",
        "gitlab.token_file",
        "gitlab.webhook_secrets.grp.file",
        "gitlab.webhook_secrets.grp.env",
    ]
