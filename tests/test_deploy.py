"""Static checks of deploy/: the GitHub App manifest, compose.yaml, the Kubernetes
manifests, the Dockerfile and the systemd units agree with what the bot reads and needs."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from bot.config import ServerSettings, load_settings
from bot.config.env import ENV_OVERRIDES, ENV_SECRETS
from bot.http_server import RESERVED_FILES
from bot.webhooks.github import _HANDLERS

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "kubernetes"
UNITS = DEPLOY / "systemd"

# Every environment variable the bot reads: the mappings in bot/config/env.py plus the ones
# read elsewhere (the config file, the log level, the LLM key fallbacks).
KNOWN_ENV = (
    set(ENV_OVERRIDES)
    | set(ENV_SECRETS)
    | {"BOT_CONFIG", "BOT_LOG_LEVEL", "LLM_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"}
)
SANDBOX_OPTS = {"seccomp=./seccomp/bwrap.json", "apparmor=unconfined", "systempaths=unconfined"}
SECCOMP = DEPLOY / "seccomp" / "bwrap.json"
APPARMOR_NAME = "coding-agent-bot-bwrap"
APPARMOR = DEPLOY / "apparmor" / APPARMOR_NAME
TEST_DSN = {"BOT_POSTGRES_DSN": "postgresql://bot:pw@db.invalid:5432/bot"}


def _role(argv: list[str]) -> str:
    assert argv[argv.index("bot") + 1] == "serve", argv
    return argv[argv.index("--role") + 1] if "--role" in argv else "all"


def _settings_from_text(tmp_path: Path, text: str) -> Any:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return load_settings(TEST_DSN, path)


# --- GitHub App manifest ---------------------------------------------------------------------

MANIFEST_KEYS = {
    "name", "url", "hook_attributes", "redirect_url", "callback_urls", "setup_url",
    "description", "public", "default_events", "default_permissions",
    "request_oauth_on_install", "setup_on_update",
}  # fmt: skip
NEEDED_PERMISSIONS = {
    "contents": "write",
    "issues": "write",
    "pull_requests": "write",
    "metadata": "read",
    "checks": "read",
    "actions": "read",
    "statuses": "read",
}


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    data = json.loads((DEPLOY / "github-app-manifest.json").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_manifest_has_only_github_manifest_parameters(manifest: dict[str, Any]) -> None:
    assert set(manifest) <= MANIFEST_KEYS
    assert {"name", "url", "hook_attributes", "redirect_url"} <= set(manifest)
    assert manifest["public"] is False
    hook = urlsplit(manifest["hook_attributes"]["url"])
    assert hook.scheme == "https" and hook.path == "/webhooks/github"
    assert urlsplit(manifest["redirect_url"]).scheme == "https"


def test_manifest_permissions_are_what_the_bot_needs(manifest: dict[str, Any]) -> None:
    assert manifest["default_permissions"] == NEEDED_PERMISSIONS


def test_manifest_events_are_the_ones_the_bot_parses(manifest: dict[str, Any]) -> None:
    automatic = {"installation", "installation_repositories", "ping"}  # sent to every App
    assert sorted(manifest["default_events"]) == sorted(set(_HANDLERS) - automatic)


# GitHub's settings page names some permissions otherwise than the manifest's keys.
UI_NAMES = {"commit_statuses": "statuses"}


def _readme_list(text: str, label: str) -> list[str]:
    flat = " ".join(text.split())
    match = re.search(rf"{label}: (.+?)(?: \(|\. )", flat)
    assert match, f"docs/github.md has no '{label}:' line"
    return [item.strip() for item in match.group(1).split(",")]


def _snake(words: str) -> str:
    return "_".join(words.lower().split())


def test_manifest_matches_the_readmes(manifest: dict[str, Any]) -> None:
    readme = (ROOT / "docs" / "github.md").read_text(encoding="utf-8")  # the App's set-up
    permissions = {}
    for item in _readme_list(readme, "Repository permissions"):
        access = "write" if "write" in item else "read"
        name = item.replace("*", "").replace("read & write", "").replace(" read", "")
        key = _snake(name)
        permissions[UI_NAMES.get(key, key)] = access
    assert permissions == manifest["default_permissions"]
    events = [_snake(e) for e in _readme_list(readme, "Subscribe to events")]
    assert events == manifest["default_events"]
    deploy_readme = (DEPLOY / "README.md").read_text(encoding="utf-8")
    for name, access in manifest["default_permissions"].items():
        assert f"`{name}: {access}`" in deploy_readme
    for event in manifest["default_events"]:
        assert f"`{event}`" in deploy_readme


# --- Docker Compose --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    docs = list(yaml.safe_load_all((DEPLOY / "compose.yaml").read_text(encoding="utf-8")))
    assert len(docs) == 1 and isinstance(docs[0], dict)
    return docs[0]


def _bot_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: svc
        for name, svc in compose["services"].items()
        if "build" in svc or str(svc.get("image", "")).startswith("coding-agent-bot")
    }


def _default(value: str) -> str:
    """``${VAR:-default}`` -> default, as Compose does when VAR is unset."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)


def test_compose_has_the_single_node_and_the_scale_out_services(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"bot", "postgres", "web", "worker"}
    assert "profiles" not in services["bot"]
    for name in ("postgres", "web", "worker"):
        assert services[name]["profiles"] == ["scale-out"]
    roles = {name: _role(svc["command"]) for name, svc in _bot_services(compose).items()}
    assert roles == {"bot": "all", "web": "web", "worker": "worker"}


def test_compose_passes_only_variables_the_bot_reads(compose: dict[str, Any]) -> None:
    for name, svc in _bot_services(compose).items():
        unknown = set(svc["environment"]) - KNOWN_ENV
        assert not unknown, f"{name}: the bot does not read {sorted(unknown)}"
        targets = [c["target"] for c in svc["configs"]]
        assert svc["environment"]["BOT_CONFIG"] in targets, name


def test_compose_single_node_keeps_sqlite_on_a_volume(compose: dict[str, Any]) -> None:
    bot = compose["services"]["bot"]
    data_dir = bot["environment"]["BOT_DATA_DIR"]
    volume = next(v for v in bot["volumes"] if v.endswith(f":{data_dir}"))
    assert volume.split(":")[0] in compose["volumes"]
    config = compose["configs"][bot["configs"][0]["source"]]
    settings = load_settings(TEST_DSN, (DEPLOY / config["file"]).resolve())
    assert settings.storage.backend == "sqlite"


def test_compose_scale_out_shares_one_postgres(compose: dict[str, Any], tmp_path: Path) -> None:
    services = compose["services"]
    postgres_env = services["postgres"]["environment"]
    for name in ("web", "worker"):
        svc = services[name]
        assert "postgres" in svc["depends_on"]
        dsn = urlsplit(_default(svc["environment"]["BOT_POSTGRES_DSN"]))
        assert dsn.hostname == "postgres"
        assert dsn.username == postgres_env["POSTGRES_USER"]
        assert dsn.path == "/" + postgres_env["POSTGRES_DB"]
        assert dsn.password == _default(postgres_env["POSTGRES_PASSWORD"])
        config = compose["configs"][svc["configs"][0]["source"]]
        settings = _settings_from_text(tmp_path, config["content"])
        assert settings.storage.backend == "postgres"
        assert str(settings.data_dir) == svc["environment"]["BOT_DATA_DIR"]


def test_compose_sandbox_exceptions_only_where_tasks_run(compose: dict[str, Any]) -> None:
    for name, svc in _bot_services(compose).items():
        opts = set(svc.get("security_opt", []))
        if _role(svc["command"]) == "web":
            assert not opts & SANDBOX_OPTS, f"{name} runs no commands"
        else:
            assert opts >= SANDBOX_OPTS, name
        for opt in opts:  # the tested profile (test_deploy_profiles.py), never unconfined
            kind, _, value = opt.partition("=")
            if kind == "seccomp":
                assert (DEPLOY / value).resolve() == SECCOMP.resolve(), name
    worker = compose["services"]["worker"]
    assert "healthcheck" not in worker  # it serves /healthz on 8080 (--port), as the image asks
    assert worker["command"][worker["command"].index("--port") + 1] == "8080"


# --- Kubernetes --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def k8s() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            assert isinstance(doc, dict), path
            docs.append(doc)
    return docs


def _one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}"
    return found[0]


def _deployments(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def test_k8s_manifests_are_namespace_agnostic(k8s: list[dict[str, Any]]) -> None:
    kinds = sorted(d["kind"] for d in k8s)
    assert kinds == [
        "ConfigMap", "Deployment", "Deployment", "Deployment",
        "PersistentVolumeClaim", "Secret", "Service",
    ]  # fmt: skip
    for doc in k8s:
        assert doc["apiVersion"] and doc["metadata"]["name"]
        assert "namespace" not in doc["metadata"], doc["metadata"]["name"]


def test_k8s_secret_holds_only_placeholders_the_bot_reads(k8s: list[dict[str, Any]]) -> None:
    secret = _one(k8s, "Secret", "coding-agent-bot-secrets")
    data = secret["stringData"]
    assert "data" not in secret
    assert set(data) <= KNOWN_ENV
    for key, value in data.items():
        assert "REPLACE_ME" in value, f"{key} looks like a real value"


def test_k8s_containers_use_only_variables_the_bot_reads(k8s: list[dict[str, Any]]) -> None:
    for name, deployment in _deployments(k8s).items():
        container = _container(deployment)
        names = {e["name"] for e in container.get("env", [])}
        assert names <= KNOWN_ENV, f"{name}: {sorted(names - KNOWN_ENV)}"
        refs = [e["secretRef"]["name"] for e in container.get("envFrom", [])]
        assert refs == ["coding-agent-bot-secrets"], name


def test_k8s_config_files_are_valid_configurations(
    k8s: list[dict[str, Any]], tmp_path: Path
) -> None:
    data = _one(k8s, "ConfigMap", "coding-agent-bot-config")["data"]
    backends = {
        key: _settings_from_text(tmp_path, text).storage.backend for key, text in data.items()
    }
    assert backends == {"config.yaml": "postgres", "config-sqlite.yaml": "sqlite"}


def test_k8s_bot_config_points_at_the_mounted_config_map(k8s: list[dict[str, Any]]) -> None:
    keys = set(_one(k8s, "ConfigMap", "coding-agent-bot-config")["data"])
    for name, deployment in _deployments(k8s).items():
        container = _container(deployment)
        env = {e["name"]: e["value"] for e in container["env"]}
        config_path = Path(env["BOT_CONFIG"])
        mount = next(
            m for m in container["volumeMounts"] if m["mountPath"] == str(config_path.parent)
        )
        volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
        items = volumes[mount["name"]]["configMap"]["items"]
        assert [i["path"] for i in items] == [config_path.name], name
        assert {i["key"] for i in items} <= keys, name


def _probe_path(container: dict[str, Any], probe: str) -> str:
    return str(container[probe]["httpGet"]["path"])


def test_k8s_pods_are_probed_and_only_web_pods_take_webhooks(k8s: list[dict[str, Any]]) -> None:
    service = _one(k8s, "Service", "coding-agent-bot")
    selector = service["spec"]["selector"]
    for deployment in _deployments(k8s).values():
        container = _container(deployment)
        role = _role(container["args"])
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
        takes_webhooks = role in ("web", "all")
        assert (selector.items() <= labels.items()) == takes_webhooks, role
        assert _probe_path(container, "readinessProbe") == "/readyz"
        assert _probe_path(container, "livenessProbe") == "/healthz"
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert container["readinessProbe"]["httpGet"]["port"] in ports
        assert service["spec"]["ports"][0]["targetPort"] in ports
        assert ports[service["spec"]["ports"][0]["targetPort"]] == int(
            container["args"][container["args"].index("--port") + 1]
        )


def test_k8s_deployments_do_not_select_each_others_pods(k8s: list[dict[str, Any]]) -> None:
    deployments = _deployments(k8s)
    for name, deployment in deployments.items():
        selector = deployment["spec"]["selector"]["matchLabels"].items()
        for other_name, other in deployments.items():
            labels = other["spec"]["template"]["metadata"]["labels"].items()
            assert (selector <= labels) == (name == other_name), (name, other_name)


def test_k8s_roles_and_the_sqlite_variant(k8s: list[dict[str, Any]]) -> None:
    deployments = _deployments(k8s)
    roles = {name: _role(_container(d)["args"]) for name, d in deployments.items()}
    assert sorted(roles.values()) == ["all", "web", "worker"]
    claim = _one(k8s, "PersistentVolumeClaim", "coding-agent-bot-data")["metadata"]["name"]
    for name, deployment in deployments.items():
        volumes = deployment["spec"]["template"]["spec"]["volumes"]
        claims = [
            v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v
        ]
        if roles[name] == "all":
            assert claims == [claim]
            assert deployment["spec"]["replicas"] == 1
            assert deployment["spec"]["strategy"]["type"] == "Recreate"
        else:
            assert claims == [], f"{name} must not share the SQLite volume"


def test_k8s_sandbox_settings_only_where_tasks_run(k8s: list[dict[str, Any]]) -> None:
    for name, deployment in _deployments(k8s).items():
        pod = deployment["spec"]["template"]["spec"]
        container = _container(deployment)
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert pod["securityContext"]["runAsNonRoot"] is True
        if _role(container["args"]) == "web":
            assert "procMount" not in context and pod.get("hostUsers", True) is True
            continue
        assert context["procMount"] == "Unmasked", name
        assert pod["hostUsers"] is False, name  # Unmasked is refused without it
        assert context["seccompProfile"] == {
            "type": "Localhost",
            "localhostProfile": "coding-agent-bot/bwrap.json",
        }, name
        assert context["appArmorProfile"] == {
            "type": "Localhost",
            "localhostProfile": APPARMOR_NAME,
        }, name


def test_k8s_nothing_runs_unconfined_and_each_exception_says_why(
    k8s: list[dict[str, Any]],
) -> None:
    for path in sorted(K8S.glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        assert "Unconfined" not in text, path.name
        lines = text.splitlines()
        for number, line in enumerate(lines):
            profile = line.strip().endswith("Profile:") and "Localhost" in lines[number + 1]
            if line.strip() == "procMount: Unmasked" or profile:
                assert lines[number - 1].strip().startswith("#"), f"{path.name}:{number + 1}"


# --- Dockerfile ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    text = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    joined = re.sub(r"\\\n", " ", text)
    lines = [line.strip() for line in joined.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def _args(dockerfile: list[tuple[str, str]], instruction: str) -> list[str]:
    return [args for name, args in dockerfile if name == instruction]


def _stages(dockerfile: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The instructions of each build stage, in order (each starts with its FROM)."""
    stages: list[list[tuple[str, str]]] = []
    for name, args in dockerfile:
        if name == "FROM":
            stages.append([])
        stages[-1].append((name, args))
    return stages


def test_dockerfile_base_packages_and_user(dockerfile: list[tuple[str, str]]) -> None:
    build, image = _args(dockerfile, "FROM")
    assert build.removesuffix(" AS build") == image
    name, _, digest = image.partition("@")
    assert name == "python:3.11-slim-bookworm"
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), "the base image is pinned by digest"
    text = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    assert "imagetools inspect python:3.11-slim-bookworm" in text  # how to move the pin
    installs = [a for a in _args(dockerfile, "RUN") if "apt-get install" in a]
    assert installs and {"bubblewrap", "git"} <= set(installs[0].split())
    user = _args(dockerfile, "USER")[-1].split(":")[0]
    assert user not in ("root", "0")
    last_user = max(i for i, (name, _) in enumerate(dockerfile) if name == "USER")
    assert all(name != "RUN" for name, _ in dockerfile[last_user:])


def test_dockerfile_serves_and_checks_health(dockerfile: list[tuple[str, str]]) -> None:
    assert _args(dockerfile, "EXPOSE") == ["8080"]
    (healthcheck,) = _args(dockerfile, "HEALTHCHECK")
    assert "urllib" in healthcheck and "http://127.0.0.1:8080/healthz" in healthcheck
    (cmd,) = _args(dockerfile, "CMD")
    assert json.loads(cmd) == ["bot", "serve", "--host", "0.0.0.0"]  # noqa: S104


def test_dockerfile_installs_the_wheel_not_the_source_tree(
    dockerfile: list[tuple[str, str]],
) -> None:
    build, image = _stages(dockerfile)
    build_copies = [args.split() for args in _args(build, "COPY")]
    sources = [src for args in build_copies for src in args[:-1]]
    for src in sources:
        assert (ROOT / src).exists(), f"COPY {src}: not in the build context"
    assert {"pyproject.toml", "README.md", "bot", "prompts"} <= set(sources)
    (wheel,) = _args(build, "RUN")
    assert "pip wheel" in wheel and "--no-deps" in wheel
    wheel_dir = wheel.split("--wheel-dir", 1)[1].split()[0]
    # The image takes only the wheel (and the config) from outside: prompts/ ships inside it.
    image_copies = [args.split() for args in _args(image, "COPY")]
    assert ["--from=build", wheel_dir, "/tmp/dist"] in image_copies
    assert [args[:-1] for args in image_copies if not args[0].startswith("--")] == [["config.yaml"]]
    (install,) = [a for a in _args(image, "RUN") if "pip install" in a]
    assert 'pip install "$(echo /tmp/dist/bot-*.whl)[postgres,traces]"' in install
    runs = " ".join(_args(dockerfile, "RUN"))
    assert " -e " not in f" {runs} " and "--editable" not in runs


# --- systemd -----------------------------------------------------------------------------------

BREAK_BWRAP = (
    "ProtectKernelTunables", "ProtectKernelLogs", "ProcSubset", "RestrictNamespaces",
    "MemoryDenyWriteExecute", "PrivateNetwork",
)  # fmt: skip


def _unit(path: Path) -> dict[str, dict[str, list[str]]]:
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        assert not line.endswith("\\"), "continuation lines are not used here"
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        assert current is not None, line
        key, _, value = line.partition("=")
        current.setdefault(key, []).append(value)
    return sections


UNIT_ROLES = {"coding-agent-bot.service": "all", "coding-agent-bot-worker@.service": "worker"}


@pytest.mark.parametrize(("name", "role"), sorted(UNIT_ROLES.items()))
def test_systemd_unit_runs_bot_serve(name: str, role: str) -> None:
    service = _unit(UNITS / name)["Service"]
    (exec_start,) = service["ExecStart"]
    argv = shlex.split(exec_start)
    assert argv[0].endswith("/bot") and argv[1] == "serve"
    assert _role(["bot", *argv[1:]]) == role
    assert service["EnvironmentFile"] and service["User"][0] not in ("root", "0")
    env = dict(item.split("=", 1) for item in service["Environment"])
    assert set(env) <= KNOWN_ENV
    assert env["BOT_DATA_DIR"] in service["ReadWritePaths"][0].split()


@pytest.mark.parametrize("name", sorted(UNIT_ROLES))
def test_systemd_units_give_the_open_files_the_connections_need(name: str) -> None:
    (limit,) = _unit(UNITS / name)["Service"]["LimitNOFILE"]
    needed = ServerSettings().limit_concurrency + RESERVED_FILES
    assert int(limit) >= needed


@pytest.mark.parametrize("name", sorted(UNIT_ROLES))
def test_systemd_hardening_leaves_bubblewrap_working(name: str) -> None:
    service = _unit(UNITS / name)["Service"]
    assert service["NoNewPrivileges"] == ["yes"]
    assert service["ProtectSystem"] == ["strict"]
    assert not set(BREAK_BWRAP) & set(service), "these settings break the sandbox"
    if "SystemCallFilter" in service:
        assert "@mount" in " ".join(service["SystemCallFilter"])
    families = " ".join(service.get("RestrictAddressFamilies", ["AF_NETLINK"]))
    assert "AF_NETLINK" in families and not families.startswith("~")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
@pytest.mark.parametrize("name", sorted(UNIT_ROLES))
def test_systemd_analyze_verify(name: str, tmp_path: Path) -> None:
    fake_bot = tmp_path / "bot"
    fake_bot.write_text("#!/bin/sh\n", encoding="utf-8")
    fake_bot.chmod(0o755)
    text = re.sub(
        r"^ExecStart=\S+/bot ", f"ExecStart={fake_bot} ", (UNITS / name).read_text(), flags=re.M
    )
    unit = tmp_path / name.replace("@.", "@1.")
    unit.write_text(text, encoding="utf-8")
    result = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0 and result.stderr.strip() == "", result.stderr
