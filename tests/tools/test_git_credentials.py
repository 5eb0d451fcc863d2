"""The forge token stays with the forge: the credential helper answers only the clone's own
scheme, host and port, and git ignores the machine's and the user's configuration, so a
repository's ``.lfsconfig`` cannot make git-lfs carry the token (or anything) elsewhere.

End to end: a real smart-HTTP remote that demands the token (``http_remote``), a repository
with ``.gitattributes``, ``.lfsconfig`` and one LFS pointer file, git-lfs's filter enabled the
way ``git lfs install`` enables it (the user's global config, and a system config through
``GIT_CONFIG_SYSTEM``: this machine's own files are not touched), and a listener on another
loopback port where ``.lfsconfig`` points. The clone goes through ``Workspace.ensure``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from bot.forges.base import CloneAuth
from bot.sandbox.gitcmd import Identity, WorkspaceError, base_env, run_git
from bot.sandbox.workspace import Workspace
from tests.loopback import serving
from tests.tools.conftest import BASE_FILES, HttpRemote, _handler, make_remote, static_auth

TOKEN = "ghs_secret-token-for-the-forge-only"
LFS_FILTER = """[filter "lfs"]
\tclean = git-lfs clean -- %f
\tsmudge = git-lfs smudge -- %f
\tprocess = git-lfs filter-process
\trequired = true
"""
POINTER = (
    b"version https://git-lfs.github.com/spec/v1\n"
    b"oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
    b"size 12345\n"
)


@dataclass
class Listener:
    """Whatever reaches it: request lines, headers and bodies."""

    url: str = ""
    seen: list[bytes] = field(default_factory=list)


def _listener_handler(state: Listener) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def _record(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            state.seen.append(self.requestline.encode() + b"\n" + bytes(self.headers) + body)
            if self.headers.get("Authorization"):
                self.send_response(404)  # got what it wanted: the clone may go on failing
            else:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="lfs"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = _record
        do_POST = _record
        do_PUT = _record

    return Handler


@pytest.fixture
def listener() -> Iterator[Listener]:
    state = Listener()
    with serving(_listener_handler(state)) as server:
        state.url = f"http://127.0.0.1:{server.server_address[1]}"
        yield state


@pytest.fixture
def lfs_remote(tmp_path: Path, listener: Listener) -> Iterator[HttpRemote]:
    files = {
        **BASE_FILES,
        ".gitattributes": b"*.bin filter=lfs diff=lfs merge=lfs -text\n",
        ".lfsconfig": f'[lfs]\n\turl = {listener.url}/lfs\n[lfs "{listener.url}/lfs"]\n'
        "\taccess = basic\n".encode(),
        "data.bin": POINTER,
    }
    remote = make_remote(tmp_path / "origin", files)
    state = HttpRemote(url="", username="x-access-token", password=TOKEN)
    with serving(_handler(remote.bare.parent, state)) as server:
        state.url = f"http://127.0.0.1:{server.server_address[1]}/{remote.bare.name}"
        yield state


@pytest.fixture
def lfs_everywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """git-lfs's filter on for every git of the machine and of the user, in files of the
    test's own: a system config through ``GIT_CONFIG_SYSTEM`` and the user's
    ``~/.gitconfig`` (``HOME``), as ``git lfs install [--system]`` writes them."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(LFS_FILTER)
    system = tmp_path / "gitconfig-system"
    system.write_text(LFS_FILTER)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_SYSTEM", str(system))
    monkeypatch.delenv("GIT_CONFIG_NOSYSTEM", raising=False)


def _files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


@pytest.mark.usefixtures("lfs_everywhere")
async def test_an_lfsconfig_cannot_send_the_token_to_its_own_server(
    lfs_remote: HttpRemote, listener: Listener, tmp_path: Path
) -> None:
    ws = Workspace(
        tmp_path / "ws", auth=static_auth(lfs_remote.url, password=TOKEN), branch="agent/9-lfs",
        base_branch="main", git_timeout=30,
    )  # fmt: skip
    try:
        await ws.ensure()
    except WorkspaceError as exc:  # what the listener saw is the first thing to check
        failed: WorkspaceError | None = exc
    else:
        failed = None
    seen = b"\n".join(listener.seen)
    assert TOKEN.encode() not in seen
    assert base64.b64encode(f"x-access-token:{TOKEN}".encode()) not in seen
    assert listener.seen == []  # nothing reached the host .lfsconfig names
    assert failed is None
    # the clone worked with the token, on the forge's own host
    assert any("git-upload-pack" in path for path in lfs_remote.authorized)
    assert (ws.path / "data.bin").read_bytes() == POINTER  # left as the pointer it is
    basic = base64.b64encode(f"x-access-token:{TOKEN}".encode())
    for needle in (TOKEN.encode(), basic):
        assert _files_containing(ws.path, needle) == []
        assert _files_containing(tmp_path / "home", needle) == []
    # and a push still authenticates on the forge itself
    (ws.path / "x.txt").write_text("x\n")
    assert await ws.commit_and_push("after lfs") is not None
    assert listener.seen == []


def _env() -> dict[str, str]:
    return base_env(os.environ, Identity("t", "t@example.invalid"))


async def _fill(request: str, auth: CloneAuth, cwd: Path) -> tuple[int, str]:
    result = await run_git(
        ["credential", "fill"], cwd=cwd, env=_env(), timeout=30, auth=auth,
        stdin=request.encode(), check=False,
    )  # fmt: skip
    return result.code, result.stdout + result.stderr


@pytest.mark.parametrize(
    "request_text",
    [
        "protocol=https\nhost=attacker.example\n\n",
        "protocol=https\nhost=forge.example:8443\n\n",  # same name, another port
        "protocol=http\nhost=forge.example\n\n",  # same name, another scheme
        "protocol=https\nhost=forge.example.attacker.example\n\n",
        "protocol=https\nhost=FORGE.example.\n\n",
        "host=forge.example\n\n",
    ],
)
@pytest.mark.usefixtures("lfs_everywhere")
async def test_the_credential_helper_refuses_any_other_host(
    request_text: str, tmp_path: Path
) -> None:
    auth = CloneAuth(url="https://forge.example/acme/demo.git", username="x", password=TOKEN)
    code, output = await _fill(request_text, auth, tmp_path)
    assert code != 0
    assert TOKEN not in output


@pytest.mark.parametrize(
    ("url", "request_text"),
    [
        ("https://forge.example/acme/demo.git", "protocol=https\nhost=forge.example\n\n"),
        ("https://forge.example:443/a/b.git", "protocol=https\nhost=forge.example\n\n"),
        ("https://forge.example/a/b.git", "protocol=https\nhost=forge.example:443\n\n"),
        ("http://127.0.0.1:8080/a/b.git", "protocol=http\nhost=127.0.0.1:8080\n\n"),
        (
            "https://forge.example/a/b.git",
            "protocol=https\nhost=forge.example\npath=a/b.git/info/lfs\n\n",
        ),
    ],
)
async def test_the_credential_helper_answers_the_forge_itself(
    url: str, request_text: str, tmp_path: Path
) -> None:
    auth = CloneAuth(url=url, username="x-access-token", password=TOKEN)
    code, output = await _fill(request_text, auth, tmp_path)
    assert code == 0
    assert f"username=x-access-token\npassword={TOKEN}\n" in output


async def test_credentials_that_would_break_the_helper_protocol_are_refused(
    tmp_path: Path,
) -> None:
    auth = CloneAuth(url="https://forge.example/a.git", username="x", password="a\nhost=evil")
    with pytest.raises(WorkspaceError, match="credential"):
        await _fill("protocol=https\nhost=forge.example\n\n", auth, tmp_path)


def test_git_ignores_the_system_and_global_configuration(
    lfs_everywhere: None, tmp_path: Path
) -> None:
    env = _env()
    done = subprocess.run(
        ["git", "config", "--show-origin", "--list"], cwd=tmp_path, env=env,
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "git-lfs" not in done.stdout
    assert "file:" not in done.stdout  # every setting comes from the bot's own environment
    assert env["GIT_LFS_SKIP_SMUDGE"] == "1"


# --- LFS when the settings ask for it: the forge's own endpoint, never .lfsconfig's ----------

CONTENT = b"\x00real large binary content\n" * 3


def _pointer(data: bytes) -> bytes:
    oid = hashlib.sha256(data).hexdigest()
    return (
        f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {len(data)}\n"
    ).encode()


@dataclass
class LfsStore:
    """The forge's own LFS server, beside its git server (``<repo>.git/info/lfs``)."""

    objects: dict[str, bytes] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)


def _forge_handler(root: Path, state: HttpRemote, store: LfsStore) -> type[BaseHTTPRequestHandler]:
    git_handler = _handler(root, state)
    expected = "Basic " + base64.b64encode(f"{state.username}:{TOKEN}".encode()).decode()

    class Handler(git_handler):  # type: ignore[valid-type,misc]
        def _lfs(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            store.requests.append(f"{self.command} {self.path}")
            if self.headers.get("Authorization") != expected:
                self._answer(401, b"", {"WWW-Authenticate": 'Basic realm="lfs"'})
            elif self.path.endswith("/info/lfs/objects/batch"):
                self._batch(json.loads(body))
            elif "/lfs-object/" in self.path and self.command == "GET":
                data = store.objects.get(self.path.rsplit("/", 1)[1])
                self._answer(200 if data is not None else 404, data or b"", {})
            elif "/lfs-object/" in self.path and self.command == "PUT":
                store.objects[self.path.rsplit("/", 1)[1]] = body
                self._answer(200, b"", {})
            else:  # locks and the rest: not offered
                self._answer(404, b"{}", {"Content-Type": "application/vnd.git-lfs+json"})

        def _batch(self, request: dict[str, Any]) -> None:
            base = f"http://{self.headers['Host']}/lfs-object/"
            answered = []
            for item in request["objects"]:
                oid, entry = item["oid"], {"oid": item["oid"], "size": item["size"]}
                if request["operation"] == "download":
                    entry["actions"] = {"download": {"href": base + oid}}
                elif oid not in store.objects:
                    entry["actions"] = {"upload": {"href": base + oid}}
                answered.append(entry)
            payload = json.dumps({"transfer": "basic", "objects": answered}).encode()
            self._answer(200, payload, {"Content-Type": "application/vnd.git-lfs+json"})

        def _answer(self, status: int, payload: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _route(self) -> None:
            if "/info/lfs/" in self.path or "/lfs-object/" in self.path:
                self._lfs()
            else:
                git_handler._serve(self)

        do_GET = _route
        do_POST = _route
        do_PUT = _route

    return Handler


@pytest.mark.usefixtures("lfs_everywhere")
async def test_lfs_asked_for_comes_from_the_forges_own_endpoint_only(
    tmp_path: Path, listener: Listener
) -> None:
    files = {
        **BASE_FILES,
        ".gitattributes": b"*.bin filter=lfs diff=lfs merge=lfs -text\n",
        ".lfsconfig": f"[lfs]\n\turl = {listener.url}/lfs\n\tpushurl = {listener.url}/up\n"
        f'[remote "origin"]\n\tlfsurl = {listener.url}/r\n'.encode(),
        "data.bin": _pointer(CONTENT),
    }
    remote = make_remote(tmp_path / "origin", files)
    state = HttpRemote(url="", username="x-access-token", password=TOKEN)
    store = LfsStore(objects={hashlib.sha256(CONTENT).hexdigest(): CONTENT})
    with serving(_forge_handler(remote.bare.parent, state, store)) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/{remote.bare.name}"
        ws = Workspace(
            tmp_path / "ws", auth=static_auth(url, password=TOKEN), branch="agent/9-lfs",
            base_branch="main", git_timeout=60, lfs=True,
        )  # fmt: skip
        await ws.ensure()
        assert (ws.path / "data.bin").read_bytes() == CONTENT
        assert await ws.changed_files() == []  # the bot's own filter: no spurious change
        changed = CONTENT + b"more\n"
        (ws.path / "data.bin").write_bytes(changed)
        assert await ws.commit_and_push("a new binary") is not None
    assert listener.seen == []
    assert any(r.startswith("POST /remote.git/info/lfs/objects/batch") for r in store.requests)
    assert store.objects[hashlib.sha256(changed).hexdigest()] == changed
    assert remote.show("agent/9-lfs", "data.bin") == _pointer(changed)
