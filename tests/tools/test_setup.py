"""Set-up before work: detection, the host's package configuration, and real installs
from the package index into a real clone, in the real sandbox, cached per repository."""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from bot.config import SandboxSettings
from bot.sandbox.egress import Resolve
from bot.sandbox.sandbox import CommandResult, Sandbox
from bot.sandbox.setup import Preparer, SetupResult, SetupStatus
from bot.sandbox.setup_cache import SetupCache
from bot.sandbox.setup_env import package_config
from bot.sandbox.setup_key import cache_key
from bot.sandbox.setup_plan import SetupSource, plan_setup, sandbox_which
from bot.sandbox.workspace import Workspace
from bot.tools.repo_config import Argv
from tests.tools.conftest import git, make_remote, static_auth

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")
needs_node = pytest.mark.skipif(sandbox_which("npm") is None, reason="node/npm not installed")


def _index_reachable() -> bool:
    url = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple/").rstrip("/")
    try:
        with urllib.request.urlopen(f"{url}/iniconfig/", timeout=5) as answer:  # noqa: S310
            return bool(answer.status == 200)
    except OSError:
        return False


needs_index = pytest.mark.skipif(
    not _index_reachable(), reason="the Python package index is unreachable"
)

PACKAGE = {
    "pyproject.toml": b"""[build-system]
requires = ["flit_core>=3.4,<4"]
build-backend = "flit_core.buildapi"

[project]
name = "tinypkg"
version = "0.1.0"
description = "A tiny package for the set-up tests"
dependencies = ["iniconfig"]

[project.optional-dependencies]
test = ["pytest"]
""",
    "tinypkg/__init__.py": b'''"""Reads one key of an ini text."""
import iniconfig


def value(text: str, section: str, key: str) -> str:
    return iniconfig.IniConfig("x.ini", data=text)[section][key]
''',
    "tests/test_tinypkg.py": b"""import tinypkg


def test_value() -> None:
    assert tinypkg.value("[a]\\nb = c\\n", "a", "b") == "c"
""",
}


def _write(root: Path, files: Mapping[str, bytes | str]) -> None:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data.encode() if isinstance(data, str) else data)


def _which_all(name: str) -> str | None:
    return f"/usr/bin/{name}"


# --- detection (pure) -------------------------------------------------------------------------


def test_a_python_project_gets_a_venv_with_the_project_its_test_extras_and_requirements(
    tmp_path: Path,
) -> None:
    _write(tmp_path, PACKAGE)
    _write(tmp_path, {"requirements-dev.txt": "ruff\n"})
    plan = plan_setup(tmp_path, None, which=_which_all)
    assert plan.source is SetupSource.DETECTED
    assert plan.commands[0] == ("python3", "-m", "venv", ".venv")
    assert plan.commands[1][:3] == (".venv/bin/python", "-m", "pip")
    assert plan.commands[1][-2:] == ("--editable", ".[test]")
    assert plan.commands[2][-2:] == ("--requirement", "requirements-dev.txt")


def test_detection_of_node_make_and_what_is_not_a_project(tmp_path: Path) -> None:
    def plan(files: dict[str, str], which: Callable[[str], str | None] = _which_all) -> list[Argv]:
        root = tmp_path / str(len(list(tmp_path.iterdir())))
        root.mkdir()
        _write(root, files)
        return list(plan_setup(root, None, which=which).commands)

    assert plan({"package.json": "{}", "package-lock.json": "{}"}) == [
        ("npm", "ci", "--no-audit", "--no-fund")
    ]
    assert plan({"package.json": "{}"})[0][:2] == ("npm", "install")
    # the project's own Makefile target says how it is set up: nothing is added to it
    makefile = "setup.py:\n\ttouch x\nsetup: deps\n\tpip install .\n"
    assert plan({"Makefile": makefile, "package.json": "{}"}) == [("make", "setup")]
    assert plan({"Makefile": "setup_x:\n\ttrue\nSETUP := 1\n"}) == []
    # a pyproject.toml that only configures tools is not an installable project
    assert plan({"pyproject.toml": "[tool.ruff]\nline-length = 99\n"}) == []
    assert plan({"README.md": "hi"}) == []
    no_node = plan({"package.json": "{}"}, which=lambda n: None if n == "npm" else "/x")
    assert no_node == []


def test_the_repository_setup_wins_and_an_empty_list_turns_detection_off(tmp_path: Path) -> None:
    _write(tmp_path, PACKAGE)
    mine = plan_setup(tmp_path, (("make", "deps"),), which=_which_all)
    assert mine.commands == (("make", "deps"),) and mine.source is SetupSource.REPOSITORY
    off = plan_setup(tmp_path, (), which=_which_all)
    assert off.commands == () and off.source is SetupSource.NONE


def test_the_cache_key_follows_the_lock_files_and_the_commands(tmp_path: Path) -> None:
    _write(tmp_path, PACKAGE)
    plan = plan_setup(tmp_path, None, which=_which_all)
    first = cache_key(tmp_path, plan, which=_which_all)
    _write(tmp_path, {"tinypkg/__init__.py": "changed = True\n"})  # source: same environment
    assert cache_key(tmp_path, plan, which=_which_all) == first
    _write(tmp_path, {"requirements.txt": "iniconfig==2.0.0\n"})  # a manifest: a new one
    assert cache_key(tmp_path, plan, which=_which_all) != first


# --- the host's package-manager configuration ---------------------------------------------------


def test_index_proxy_and_config_files_pass_but_not_the_bots_secrets(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _write(home, {
        ".config/pip/pip.conf": "[global]\nindex-url = https://mirror.example/simple\n",
        ".npmrc": "//registry.example/:_authToken=ghs_botsecret123\n",
    })  # fmt: skip
    bot_key = tmp_path / "bot" / "key.pem"
    _write(bot_key.parent, {"key.pem": "-----BEGIN KEY-----"})
    environ = {
        "PIP_INDEX_URL": "https://mirror.example/simple",
        "HTTPS_PROXY": "http://proxy.example:3128",
        "NO_PROXY": "localhost",
        "PIP_EXTRA_INDEX_URL": "https://x:ghs_botsecret123@idx.example/simple",
        "SSL_CERT_FILE": str(bot_key),
        "GITHUB_TOKEN": "anything",
        "HOME": str(home),
    }
    config = package_config(environ, home, secrets=["ghs_botsecret123"], own_files=[bot_key.parent])
    assert config.env == {
        "PIP_INDEX_URL": "https://mirror.example/simple",
        "HTTPS_PROXY": "http://proxy.example:3128",
        "NO_PROXY": "localhost",
        "PIP_CONFIG_FILE": str(home / ".config/pip/pip.conf"),
    }
    assert config.expose == (home / ".config/pip/pip.conf",)
    assert len(config.left_out) == 3  # the extra index, the bot's key file, the .npmrc
    assert all("ghs_botsecret123" not in why for why in config.left_out)


# --- running set-up in the sandbox ----------------------------------------------------------------


def _preparer(
    ws: Workspace,
    cache: Path,
    configured: tuple[Argv, ...] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    home: Path | None = None,
    timeout: float = 600,
    networks: list[bool] | None = None,
    sandbox_settings: SandboxSettings | None = None,
    resolve: Resolve | None = None,
) -> Preparer:
    """A preparer as the factory makes one; ``networks`` gets, for each command run,
    whether it had network; ``resolve``: the egress proxy's name look-up."""
    settings = sandbox_settings or SandboxSettings(timeout=300, max_output_chars=20_000)
    networks = [] if networks is None else networks

    class Recording(Sandbox):
        """Notes whether each command it runs has network."""

        async def run(self, argv: Sequence[str], **kw: Any) -> CommandResult:
            networks.append(self.network)
            return await super().run(argv, **kw)

    def sandbox(expose: tuple[Path, ...], network: bool) -> Sandbox:
        return Recording(settings, network=network, expose=expose, resolve=resolve)

    package = functools.partial(
        package_config,
        dict(os.environ if environ is None else environ),
        home or Path.home(),
        secrets=(),
        own_files=(),
    )
    return Preparer(
        workspace=ws,
        configured=configured,
        sandbox=sandbox,
        package=package,
        cache=SetupCache(cache, "github-owner/tinypkg"),
        timeout=timeout,
        which=sandbox_which,
    )


def _workspace(tmp_path: Path, name: str, files: Mapping[str, bytes]) -> Workspace:
    remote = tmp_path / "origin"
    if not remote.exists():
        make_remote(remote, dict(files))
    return Workspace(
        tmp_path / "workspaces" / name,
        auth=static_auth(f"file://{remote / 'remote.git'}"),
        branch="agent/1-test",
        base_branch="main",
    )


async def _offline(ws: Workspace, *argv: str) -> str:
    """Run a command as the agent would: in the sandbox, without network."""
    sandbox = Sandbox(SandboxSettings(timeout=120, max_output_chars=20_000), network=False)
    result = await sandbox.run(list(argv), cwd=ws.path, writable=ws.path)
    assert result.exit_code == 0, result.stdout + result.stderr
    return result.stdout


@needs_bwrap
@needs_index
async def test_set_up_installs_from_the_index_and_the_next_task_restores_it_from_the_cache(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "data" / "setup-cache"
    first = _workspace(tmp_path, "task-1", PACKAGE)
    ran = await _preparer(first, cache).prepare(log_dir=tmp_path / "run-1" / "setup")
    assert ran.status is SetupStatus.RAN, ran.failure
    assert [step.command.split()[:4] for step in ran.steps] == [
        ["python3", "-m", "venv", ".venv"],
        [".venv/bin/python", "-m", "pip", "install"],
    ]
    assert ".venv" in ran.paths
    assert sorted(p.name for p in (tmp_path / "run-1" / "setup").iterdir()) == [
        "01-python3.log",
        "02-python.log",
    ]
    installed = (tmp_path / "run-1" / "setup" / "02-python.log").read_text()
    assert "iniconfig" in installed and "pytest" in installed
    # the agent's commands (no network) use what set-up installed; nothing of it is a change
    # (``pytest`` is the venv's: the prepared environment comes first on PATH)
    assert "1 passed" in await _offline(first, "pytest", "-q", "-p", "no:cacheprovider")
    assert await first.changed_files() == []

    second = _workspace(tmp_path, "task-2", PACKAGE)
    restored = await _preparer(second, cache).prepare(log_dir=tmp_path / "run-2" / "setup")
    assert restored.status is SetupStatus.RESTORED
    assert restored.steps == ()  # no command ran: nothing was installed
    assert not (tmp_path / "run-2" / "setup").exists()
    assert restored.duration < ran.duration / 2
    # the copied venv works where it now is: its scripts and the editable install moved along
    assert "1 passed" in await _offline(second, ".venv/bin/pytest", "-q", "-p", "no:cacheprovider")
    show = "import tinypkg; print(tinypkg.__file__)"
    where = await _offline(second, "python", "-c", show)
    assert where.strip() == str(second.path.resolve() / "tinypkg" / "__init__.py")
    assert await second.changed_files() == []
    # the same workspace again (a later run of the same task): nothing to do
    again = await _preparer(second, cache).prepare()
    assert again.status is SetupStatus.READY and again.steps == ()


@needs_bwrap
async def test_a_failing_set_up_reports_the_command_and_the_tail_of_its_output(
    tmp_path: Path,
) -> None:
    ws = _workspace(tmp_path, "task", {"README.md": b"hi\n"})
    failing = ("sh", "-c", "echo step one; echo 'ERROR: no matching distribution' >&2; exit 3")
    result = await _preparer(ws, tmp_path / "cache", (("true",), failing)).prepare(
        log_dir=tmp_path / "run" / "setup"
    )
    assert result.status is SetupStatus.FAILED
    step = result.failure
    assert step is not None and step.exit_code == 3
    assert shlex.split(step.command) == list(failing)
    assert "step one" in step.tail and "ERROR: no matching distribution" in step.tail
    assert step.log == "setup/02-sh.log"
    assert not (tmp_path / "cache").exists()  # a failed set-up is not cached
    # it is not marked either: the next run tries again
    assert (await _preparer(ws, tmp_path / "cache", (failing,)).prepare()).status is (
        SetupStatus.FAILED
    )


@needs_bwrap
async def test_set_up_sees_the_hosts_package_configuration_and_has_network(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    _write(home, {".config/pip/pip.conf": "[global]\nindex-url = https://mirror.example/simple\n"})
    ws = _workspace(tmp_path, "task", {"README.md": b"hi\n"})
    show = ("sh", "-c", 'echo "proxy=$HTTPS_PROXY"; cat "$PIP_CONFIG_FILE"')
    environ = {"HTTPS_PROXY": "http://proxy.example:3128", "PATH": "/usr/bin"}
    result = await _preparer(ws, tmp_path / "cache", (show,), environ=environ, home=home).prepare(
        log_dir=tmp_path / "run"
    )
    assert result.status is SetupStatus.RAN, result.failure
    log = (tmp_path / "run" / "01-sh.log").read_text()
    # the egress proxy, in the sandbox's own network namespace (it chains to the host's)
    assert "proxy=http://127.0.0.1:" in log and "proxy.example" not in log
    assert "index-url = https://mirror.example/simple" in log


@needs_bwrap
async def test_set_up_runs_within_setup_timeout(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, "task", {"README.md": b"hi\n"})
    slow = ("sh", "-c", "echo waiting; sleep 30")
    result = await _preparer(ws, tmp_path / "cache", (slow, ("true",)), timeout=2).prepare()
    step = result.failure
    assert result.status is SetupStatus.FAILED and step is not None and step.timed_out
    assert "waiting" in step.tail and len(result.steps) == 1


@needs_bwrap
@needs_node
async def test_a_node_project_is_set_up_with_npm_and_cached(tmp_path: Path) -> None:
    package = b'{"name": "tiny", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"}}'
    files = {"package.json": package, "index.js": b"module.exports = require('is-number')\n"}
    cache = tmp_path / "cache"
    first = _workspace(tmp_path, "task-1", files)
    ran = await _preparer(first, cache).prepare()
    if ran.status is SetupStatus.FAILED and "ENOTFOUND" in (ran.failure or ran).__repr__():
        pytest.skip("the npm registry is unreachable")
    assert ran.status is SetupStatus.RAN, ran.failure
    assert ran.steps[0].command.startswith("npm install")
    assert "node_modules" in ran.paths
    check = ("node", "-e", "console.log(require('./index.js')(5))")
    assert (await _offline(first, *check)).strip() == "true"
    second = _workspace(tmp_path, "task-2", files)
    restored: SetupResult = await _preparer(second, cache).prepare()
    assert restored.status is SetupStatus.RESTORED and restored.steps == ()
    assert (await _offline(second, *check)).strip() == "true"
    assert await second.changed_files() == []


@needs_bwrap
async def test_set_up_files_the_bots_branch_changed_get_no_network_and_no_cache(
    tmp_path: Path,
) -> None:
    """A follow-up clones the bot's own branch: a Makefile the agent wrote there is model
    output, and set-up must not run it with network (nor share what it made)."""
    ws = _workspace(tmp_path, "task", {"README.md": b"hi\n", "Makefile": b"lint:\n\ttrue\n"})
    seed = tmp_path / "seed"
    git("clone", "--quiet", f"file://{tmp_path / 'origin' / 'remote.git'}", str(seed), cwd=tmp_path)
    git("checkout", "--quiet", "-b", "agent/1-test", cwd=seed)
    probe = "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), 3)\""
    (seed / "Makefile").write_text(f"lint:\n\ttrue\nsetup:\n\t{probe} && echo online\n")
    git("commit", "--quiet", "-am", "the agent's Makefile", cwd=seed)
    git("push", "--quiet", "origin", "agent/1-test", cwd=seed)
    networks: list[bool] = []
    cache = tmp_path / "cache"
    result = await _preparer(ws, cache, networks=networks).prepare(log_dir=tmp_path / "run")
    assert networks == [False]
    assert [step.command for step in result.steps] == ["make setup"]
    assert result.status is SetupStatus.FAILED  # no network: the probe cannot connect
    log = (tmp_path / "run" / "01-make.log").read_text()
    assert "online" not in log.splitlines() and "Network is unreachable" in log
    assert any("without network" in note and "Makefile" in note for note in result.notes)
    assert not cache.exists()


@needs_bwrap
async def test_a_workspace_is_set_up_once_whatever_the_agent_changes_later(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, "task", {"README.md": b"hi\n"})
    first = await _preparer(ws, tmp_path / "cache", (("mkdir", "-p", "build"),)).prepare()
    assert first.status is SetupStatus.RAN and first.paths == ("build",)
    (ws.path / "requirements.txt").write_text("evil-package\n")  # the agent's change
    networks: list[bool] = []
    again = await _preparer(ws, tmp_path / "cache", None, networks=networks).prepare()
    assert again.status is SetupStatus.READY and again.steps == () and networks == []


def test_a_cache_entry_that_vanishes_mid_restore_leaves_nothing_behind(tmp_path: Path) -> None:
    made = tmp_path / "made"
    _write(made, {".venv/pyvenv.cfg": "home = /usr/bin\n", "build/out.txt": "x"})
    cache = SetupCache(tmp_path / "cache", "github-o/r")
    cache.store("ab" * 16, made, [".venv", "build"])
    shutil.rmtree(cache.entry("ab" * 16) / "files" / "build")  # pruned by another task
    target = tmp_path / "target"
    target.mkdir()
    assert cache.restore("ab" * 16, target) is None
    assert list(target.iterdir()) == []
    assert cache.restore("cd" * 16, target) is None  # no entry at all


def test_the_cache_keeps_the_most_recently_used_environments_per_repository(
    tmp_path: Path,
) -> None:
    made = tmp_path / "made"
    _write(made, {"build/out.txt": "x"})
    cache = SetupCache(tmp_path / "cache", "github-o/r", keep=2)
    for n, key in enumerate(("aa" * 16, "bb" * 16, "cc" * 16)):
        cache.store(key, made, ["build"])
        os.utime(cache.entry(key), (1000 + n, 1000 + n))
        if key == "bb" * 16:  # the older one is used again: it stays
            assert cache.restore("aa" * 16, tmp_path / "t") == ["build"]
    assert cache.has("aa" * 16) and cache.has("cc" * 16) and not cache.has("bb" * 16)


async def test_without_a_sandbox_set_up_is_skipped_not_run_on_the_host(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, "task", {"README.md": b"hi\n"})
    preparer = _preparer(ws, tmp_path / "cache", (("touch", "ran-on-the-host"),))
    settings = SandboxSettings(timeout=30)
    preparer.sandbox = lambda expose, network: Sandbox(settings, bwrap="/nonexistent/bwrap")
    result = await preparer.prepare()
    assert result.status is SetupStatus.SKIPPED and "bubblewrap" in result.error
    assert not (ws.path / "ran-on-the-host").exists()
