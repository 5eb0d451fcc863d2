"""Attacks on set-up before work, with the real sandbox, real git and real listeners.

- A cached environment restored into a clone whose tracked symbolic links point out of
  the workspace must not write through them (issue 18, item 1).
- A set-up script the bot's own branch changed never runs with network nor reaches the
  cache, whatever file set-up executes: the base branch's version runs with network, in
  a clean checkout of the base, and only that is cached (item 2).
- Set-up's network (and the agent's, when a repository allows it) reaches neither the
  host's loopback nor the link-local range (item 3).
- Two repositories never share a cache folder (item 4).

No probe here sends a packet to an address off this machine: the link-local probe
connects only when the sandbox has no route out (where the kernel refuses at once).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from bot.config import SandboxSettings
from bot.sandbox.sandbox import Sandbox
from bot.sandbox.setup import SetupStatus
from bot.sandbox.setup_cache import SetupCache
from bot.sandbox.setup_key import cache_key
from bot.sandbox.setup_plan import plan_setup
from tests.loopback import serving
from tests.tools.conftest import git
from tests.tools.test_setup import _preparer, _which_all, _workspace, _write, needs_index

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing"),
]


# --- item 1: a restore never writes through a link ------------------------------------------------

BUILD = ("sh", "-c", "mkdir -p payload && echo built > payload/out.txt && echo new > payload.bin")


def _push_to_main(tmp_path: Path, change: dict[str, str], *, links: dict[str, str]) -> None:
    """A commit on main (the base branch) with ``change`` and tracked symbolic links."""
    seed = tmp_path / f"seed-{len(list(tmp_path.glob('seed-*')))}"
    git("clone", "--quiet", f"file://{tmp_path / 'origin' / 'remote.git'}", str(seed), cwd=tmp_path)
    _write(seed, change)
    for name, target in links.items():
        (seed / name).symlink_to(target)
    git("add", "--all", cwd=seed)
    git("commit", "--quiet", "-m", "a change on main", cwd=seed)
    git("push", "--quiet", "origin", "main", cwd=seed)


@pytest.fixture
def host(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A host folder and the bot's database, outside every workspace."""
    folder = tmp_path / "host" / "folder"
    folder.mkdir(parents=True)
    database = tmp_path / "host" / "data" / "bot.sqlite3"
    database.parent.mkdir()
    database.write_bytes(b"SQLite format 3\x00 the bot's tasks")
    yield folder, database


async def test_a_restore_does_not_write_through_links_a_later_commit_tracks(
    tmp_path: Path, host: tuple[Path, Path]
) -> None:
    folder, database = host
    cache = tmp_path / "cache"
    first = _workspace(tmp_path, "task-1", {"README.md": b"hi\n"})
    ran = await _preparer(first, cache, (BUILD,)).prepare()
    assert ran.status is SetupStatus.RAN and set(ran.paths) == {"payload", "payload.bin"}
    # only links are added: the commands and the manifests stay as they were
    _push_to_main(tmp_path, {}, links={"payload": str(folder), "payload.bin": str(database)})
    second = _workspace(tmp_path, "task-2", {})
    result = await _preparer(second, cache, (BUILD,)).prepare()
    assert result.status is not SetupStatus.RESTORED
    assert list(folder.iterdir()) == []  # nothing planted in the host's folder
    assert database.read_bytes() == b"SQLite format 3\x00 the bot's tasks"
    assert (second.path / "payload").is_symlink() and (second.path / "payload.bin").is_symlink()


async def test_the_copy_from_the_base_checkout_does_not_write_through_links_the_branch_tracks(
    tmp_path: Path, host: tuple[Path, Path]
) -> None:
    """A follow-up whose branch tracks links where set-up writes (``payload`` -> a host
    folder, ``payload.bin`` -> the bot's database): set-up runs in the base checkout, and
    copying its environment into the working tree refuses the links."""
    folder, database = host
    ws = _workspace(tmp_path, "task", {"README.md": b"hi\n"})
    seed = tmp_path / "seed"
    git("clone", "--quiet", f"file://{tmp_path / 'origin' / 'remote.git'}", str(seed), cwd=tmp_path)
    git("checkout", "--quiet", "-b", "agent/1-test", cwd=seed)
    (seed / "payload").symlink_to(folder)
    (seed / "payload.bin").symlink_to(database)
    git("add", "--all", cwd=seed)
    git("commit", "--quiet", "-m", "the agent's links", cwd=seed)
    git("push", "--quiet", "origin", "agent/1-test", cwd=seed)
    result = await _preparer(ws, tmp_path / "cache", (BUILD,)).prepare()
    assert result.steps and result.steps[0].base and result.steps[0].network
    assert list(folder.iterdir()) == []  # nothing planted in the host's folder
    assert database.read_bytes() == b"SQLite format 3\x00 the bot's tasks"
    assert (ws.path / "payload").is_symlink() and (ws.path / "payload.bin").is_symlink()
    assert any("could not be copied in" in note for note in result.notes), result.notes


def test_a_restore_under_the_same_key_refuses_links_and_leaves_nothing(
    tmp_path: Path, host: tuple[Path, Path]
) -> None:
    """Whatever the key says: a restore never follows a link the clone holds, at the top
    or deeper (a venv whose bin folder is a link out)."""
    folder, database = host
    made = tmp_path / "made"
    _write(made, {
        "payload/out.txt": "built",
        "payload.bin": "new",
        "tools/.venv/pyvenv.cfg": f"home = /usr/bin\ncommand = {made}/tools/.venv\n",
        "tools/.venv/bin/activate": f"VIRTUAL_ENV={made}/tools/.venv\n",
    })  # fmt: skip
    cache = SetupCache(tmp_path / "cache", "gitlab:acme/app")
    key = "ab" * 16
    cache.store(key, made, ["payload", "payload.bin", "tools/.venv"])
    for layout in ("top", "parent"):
        root = tmp_path / f"clone-{layout}"
        root.mkdir()
        if layout == "top":
            (root / "payload").symlink_to(folder)
            (root / "payload.bin").symlink_to(database)
        else:  # a link on the way to the path: tools -> the host's folder
            (root / "tools").symlink_to(folder)
        assert cache.restore(key, root) is None
        assert list(folder.iterdir()) == []
        assert database.read_bytes() == b"SQLite format 3\x00 the bot's tasks"
        assert not (root / "payload" / "out.txt").exists() or layout == "parent"
    clean = tmp_path / "clone-clean"
    clean.mkdir()
    assert cache.restore(key, clean) == ["payload", "payload.bin", "tools/.venv"]
    assert (clean / "payload" / "out.txt").read_text() == "built"
    activate = (clean / "tools" / ".venv" / "bin" / "activate").read_text()
    assert activate == f"VIRTUAL_ENV={clean.resolve()}/tools/.venv\n"  # re-pointed


def test_links_inside_a_cached_environment_are_restored_as_links_and_not_followed(
    tmp_path: Path, host: tuple[Path, Path]
) -> None:
    """A cached venv whose ``bin`` is a link to a host folder (set-up may leave any link):
    re-pointing the venv must not rewrite the files behind it."""
    folder, _ = host
    victim = folder / "script"
    victim.write_text(f"#!/bin/sh\n# {tmp_path / 'made'}/.venv\n")
    made = tmp_path / "made"
    _write(made, {".venv/pyvenv.cfg": f"command = {made}/.venv\n"})
    (made / ".venv" / "bin").symlink_to(folder)
    cache = SetupCache(tmp_path / "cache", "github:o/r")
    cache.store("cd" * 16, made, [".venv"])
    clone = tmp_path / "clone"
    clone.mkdir()
    assert cache.restore("cd" * 16, clone) == [".venv"]
    assert (clone / ".venv" / "bin").is_symlink()
    assert victim.read_text() == f"#!/bin/sh\n# {tmp_path / 'made'}/.venv\n"  # untouched


# --- item 2: what set-up executes comes from the base branch, or it runs offline ----------------


class _Recorder(BaseHTTPRequestHandler):
    hits: list[str]

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


@pytest.fixture
def listener() -> Iterator[tuple[int, list[str]]]:
    """A real HTTP listener on the host's loopback, recording every request."""
    hits: list[str] = []
    handler = type("Recorder", (_Recorder,), {"hits": hits})
    with serving(handler) as server:
        yield server.server_address[1], hits


def _call_home(port: int) -> str:
    """A shell line that reaches the host's listener if it can, and says so."""
    code = (
        f"import socket; s = socket.create_connection(('127.0.0.1', {port}), 3); "
        "s.sendall(b'GET /reached HTTP/1.0\\r\\n\\r\\n'); s.recv(10); print('online')"
    )
    return f'python3 -c "{code}"'


BASE_FILES = {
    "README.md": b"hi\n",
    "setup.sh": b"#!/bin/sh\nsh scripts/helper.sh\n. ./env.sh\nmake -s deps\n"
    b"mkdir -p env && echo base > env/made-by\n",
    "scripts/helper.sh": b"echo helper\n",
    "env.sh": b"echo env\n",
    "Makefile": b"include rules.mk\n",
    "rules.mk": b"deps:\n\t@echo deps\n",
}
IN_THE_KEY = ("setup.sh", "rules.mk")  # the file the command names; the Makefile's include


@pytest.mark.parametrize("edited", ["setup.sh", "scripts/helper.sh", "env.sh", "rules.mk"])
async def test_a_set_up_file_the_bots_branch_edited_never_runs_with_network_nor_is_cached(
    tmp_path: Path, listener: tuple[int, list[str]], edited: str
) -> None:
    """A follow-up on the bot's branch, whose set-up file calls home: set-up runs the base
    branch's version with network (in a clean checkout of the base) and caches that; the
    branch's version, when what set-up executes differs, only ever runs offline."""
    port, hits = listener
    ws = _workspace(tmp_path, "task", BASE_FILES)
    seed = tmp_path / "seed"
    git("clone", "--quiet", f"file://{tmp_path / 'origin' / 'remote.git'}", str(seed), cwd=tmp_path)
    git("checkout", "--quiet", "-b", "agent/1-test", cwd=seed)
    line = _call_home(port)
    text = f"deps:\n\t{line}\n" if edited.endswith(".mk") else f"{line}\n"
    (seed / edited).write_text(
        text + "mkdir -p env && echo branch > env/made-by\n" * (edited == "setup.sh")
    )
    git("commit", "--quiet", "-am", "the agent's edit", cwd=seed)
    git("push", "--quiet", "origin", "agent/1-test", cwd=seed)
    networks: list[bool] = []
    cache = tmp_path / "cache"
    setup = (("sh", "setup.sh"),)
    run = tmp_path / "run"
    result = await _preparer(ws, cache, setup, networks=networks).prepare(log_dir=run)
    first, *rest = result.steps
    assert (first.network, first.base) == (True, True)  # the base's script, with network
    assert (run / "01-sh.log").read_text().split() == ["helper", "env", "deps"]
    assert all(not step.network and not step.base for step in rest)
    assert networks == [True] + [False] * len(rest)
    assert hits == []
    assert all("online" not in log.read_text().splitlines() for log in run.iterdir())
    if edited in IN_THE_KEY:  # the branch's own set-up ran on top, offline
        assert len(rest) == 1 and result.key != result.base_key
        assert any("without network" in note and edited in note for note in result.notes)
    else:  # set-up executes the same files: the base's environment is the branch's
        assert rest == [] and result.status is SetupStatus.RAN and result.key == result.base_key
        assert (ws.path / "env" / "made-by").read_text() == "base\n"
    if result.status is SetupStatus.FAILED:
        assert any(edited in hint and "without network" in hint for hint in result.hints)
    [entry] = cache.glob("*/*/manifest.json")  # the base's environment only
    assert entry.parent.name == result.base_key
    assert (entry.parent / "files" / "env" / "made-by").read_text() == "base\n"
    assert not (ws.path.parent / ".task.setup-base").exists()  # the checkout is gone
    # a later task on main restores the base's environment: nothing runs
    later = _workspace(tmp_path, "task-main", BASE_FILES)
    later.branch = "agent/2-other"
    networks.clear()
    again = await _preparer(later, cache, setup, networks=networks).prepare(log_dir=tmp_path / "r2")
    assert again.status is SetupStatus.RESTORED and networks == []
    assert (later.path / "env" / "made-by").read_text() == "base\n"


def test_the_cache_key_covers_what_set_up_executes(tmp_path: Path) -> None:
    _write(tmp_path, {k: v.decode() for k, v in BASE_FILES.items()})
    setup = (("sh", "setup.sh"),)
    plan = plan_setup(tmp_path, setup, which=_which_all)
    first = cache_key(tmp_path, plan, which=_which_all)
    _write(tmp_path, {"README.md": "changed\n"})  # not executed: the same environment
    assert cache_key(tmp_path, plan, which=_which_all) == first
    for name in ("setup.sh", "rules.mk"):  # the script set-up names; the Makefile's include
        _write(tmp_path, {name: "echo changed\n"})
        changed = cache_key(tmp_path, plan, which=_which_all)
        assert changed != first, name
        first = changed
    detected = plan_setup(tmp_path, None, which=_which_all)  # make setup: no target here
    assert detected.commands == ()


# --- item 3: set-up's network reaches the package indexes only -----------------------------------

PROBE = r"""
import os, socket, sys, urllib.error, urllib.request
port = int(sys.argv[1])
def say(*words):
    print(*words, flush=True)
try:
    socket.create_connection(("127.0.0.1", port), timeout=3).close()
    say("direct-loopback connected")
except OSError as exc:
    say("direct-loopback", type(exc).__name__)
routes = open("/proc/net/route").read().splitlines()[1:]
if any(line.split()[1] == "00000000" for line in routes):
    say("link-local routed")  # never sent: the metadata service is not ours to probe
else:
    try:
        socket.create_connection(("169.254.169.254", 80), timeout=3).close()
        say("link-local connected")
    except OSError as exc:
        say("link-local errno", exc.errno)
if not os.environ.get("http_proxy"):
    say("proxy none")
else:
    os.environ.pop("no_proxy", None)  # through the proxy on purpose, loopback included
    os.environ.pop("NO_PROXY", None)
    for name, url in (("loopback", f"http://127.0.0.1:{port}/"),
                      ("localhost", f"http://localhost:{port}/"),
                      ("metadata", "http://169.254.169.254/latest/meta-data/"),
                      ("tunnel", f"https://127.0.0.1:{port}/")):
        try:
            urllib.request.urlopen(url, timeout=20)
            say("proxied", name, 200)
        except urllib.error.HTTPError as exc:
            say("proxied", name, exc.code)
        except OSError as exc:
            say("proxied", name, "refused" if "403" in str(exc) else repr(exc))
"""
EXPECTED = [
    "direct-loopback ConnectionRefusedError",
    "link-local errno 101",  # ENETUNREACH: the sandbox's namespace has no route out
    "proxied loopback 403",
    "proxied localhost 403",
    "proxied metadata 403",
    "proxied tunnel refused",
]


async def test_set_up_reaches_neither_the_hosts_loopback_nor_link_local(
    tmp_path: Path, listener: tuple[int, list[str]]
) -> None:
    port, hits = listener
    ws = _workspace(tmp_path, "task", {"README.md": b"hi\n"})
    networks: list[bool] = []
    probe = (("python3", "-c", PROBE, str(port)),)
    result = await _preparer(ws, tmp_path / "cache", probe, networks=networks).prepare(
        log_dir=tmp_path / "run"
    )
    assert networks == [True]  # set-up has its network: it just cannot reach the host
    assert result.status is SetupStatus.RAN, result.failure
    lines = (tmp_path / "run" / "01-python3.log").read_text().splitlines()
    assert [line for line in lines if not line.startswith("egress")] == EXPECTED
    assert hits == []


async def test_the_agents_commands_with_network_take_the_same_path(
    tmp_path: Path, listener: tuple[int, list[str]]
) -> None:
    port, hits = listener
    work = tmp_path / "ws"
    work.mkdir()
    sandbox = Sandbox(SandboxSettings(network=True, timeout=120), network=True)
    result = await sandbox.run(["python3", "-c", PROBE, str(port)], cwd=work)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == EXPECTED
    assert "127.0.0.1" in result.stderr and "loopback" in result.stderr  # what was refused
    assert hits == []


@needs_index
async def test_the_package_index_is_reached_through_the_same_path(tmp_path: Path) -> None:
    work = tmp_path / "ws"
    work.mkdir()
    code = (
        "import urllib.request; "
        "print(urllib.request.urlopen('https://pypi.org/simple/iniconfig/', timeout=60).status)"
    )
    result = await Sandbox(SandboxSettings(timeout=120), network=True).run(
        ["python3", "-c", code], cwd=work
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "200"


# --- item 4: one cache folder per repository ------------------------------------------------------


def test_repositories_never_share_a_cache_folder(tmp_path: Path) -> None:
    names = ["gitlab:acme_payments/app", "gitlab:acme/payments_app", "gitlab:acme/payments/app"]
    names += ["github:acme/payments.app", "gitlab:acme/payments.app"]
    folders = {SetupCache(tmp_path, name).folder for name in names}
    assert len(folders) == len(names)
    made = tmp_path / "made"
    _write(made, {"build/out.txt": "acme_payments"})
    SetupCache(tmp_path, names[0]).store("ef" * 16, made, ["build"])
    other = tmp_path / "other"
    other.mkdir()
    assert SetupCache(tmp_path, names[1]).restore("ef" * 16, other) is None
    assert not (other / "build").exists()


async def test_an_allowed_name_that_resolves_to_the_host_is_refused(
    tmp_path: Path, listener: tuple[int, list[str]]
) -> None:
    """The operator allows ``localhost`` by mistake: the address check still refuses it."""
    port, hits = listener
    work = tmp_path / "ws"
    work.mkdir()
    settings = SandboxSettings(timeout=120, egress_allow=(f"localhost:{port}",))
    result = await Sandbox(settings, network=True).run(
        ["python3", "-c", PROBE, str(port)], cwd=work
    )
    assert "proxied localhost 403" in result.stdout.splitlines()
    assert "localhost resolves to" in result.stderr and "a loopback address" in result.stderr
    assert hits == []
