"""Real git for the workspace tests: a bare repository on disk is the remote.

``remote`` is reachable as a ``file://`` URL; ``http_remote`` serves the same bare
repository over git's smart HTTP protocol (``git http-backend`` behind a tiny
loopback server that demands HTTP Basic auth), so the clone and push credentials
really travel, and tests can check where they did not go.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from bot.forges.base import CloneAuth
from bot.sandbox.workspace import Workspace
from tests.loopback import serving

BASE_FILES: dict[str, bytes] = {
    "README.md": b"# Demo\n\nA demo project.\n",
    "src/app.py": b"def greet(name):\n    return 'Hello, ' + name\n",
    "docs/guide.txt": b"First line\nSecond line\n",
}
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
}


def git(*args: str, cwd: Path) -> str:
    """Run git for the test set-up (never for the code under test)."""
    env = {**os.environ, **GIT_ENV, "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stderr}")
    return done.stdout.strip()


@dataclass
class Remote:
    bare: Path
    url: str
    base_commit: str

    def rev(self, ref: str) -> str:
        return git("rev-parse", ref, cwd=self.bare)

    def has_branch(self, name: str) -> bool:
        return bool(git("branch", "--list", name, cwd=self.bare))

    def show(self, ref: str, path: str) -> bytes:
        done = subprocess.run(
            ["git", "show", f"{ref}:{path}"], cwd=self.bare, capture_output=True, check=True
        )
        return done.stdout


def make_remote(base: Path, files: dict[str, bytes]) -> Remote:
    seed = base / "seed"
    seed.mkdir(parents=True)
    git("init", "--quiet", "--initial-branch=main", cwd=seed)
    for rel, data in files.items():
        (seed / rel).parent.mkdir(parents=True, exist_ok=True)
        (seed / rel).write_bytes(data)
    git("add", "--all", cwd=seed)
    git("commit", "--quiet", "-m", "initial", cwd=seed)
    (seed / "CHANGELOG.md").write_text("- second commit\n")
    git("add", "--all", cwd=seed)
    git("commit", "--quiet", "-m", "second", cwd=seed)
    bare = base / "remote.git"
    git("clone", "--quiet", "--bare", str(seed), str(bare), cwd=base)
    git("config", "http.receivepack", "true", cwd=bare)
    shutil.rmtree(seed)
    return Remote(bare=bare, url=f"file://{bare}", base_commit=git("rev-parse", "main", cwd=bare))


@pytest.fixture
def remote(tmp_path: Path) -> Remote:
    return make_remote(tmp_path / "origin", BASE_FILES)


AuthFactory = Callable[[], Awaitable[CloneAuth]]


def static_auth(url: str, *, password: str = "unused-on-file-urls") -> AuthFactory:  # noqa: S107
    async def auth() -> CloneAuth:
        return CloneAuth(url=url, username="x-access-token", password=password)

    return auth


@pytest.fixture
def make_workspace(tmp_path: Path, remote: Remote) -> Callable[..., Workspace]:
    def make(
        name: str = "ws",
        *,
        branch: str = "agent/1-test",
        auth: AuthFactory | None = None,
        **kw: int,
    ) -> Workspace:
        return Workspace(
            tmp_path / name,
            auth=auth or static_auth(remote.url),
            branch=branch,
            base_branch="main",
            **kw,
        )

    return make


# --- smart HTTP -----------------------------------------------------------------------------


@dataclass
class HttpRemote:
    url: str
    username: str
    password: str
    authorized: list[str] = field(default_factory=list)
    rejected: int = 0


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int(handler.rfile.readline().strip(), 16)
            if size == 0:
                handler.rfile.readline()
                return body
            body += handler.rfile.read(size)
            handler.rfile.readline()
    return handler.rfile.read(int(handler.headers.get("Content-Length") or 0))


def _handler(project_root: Path, state: HttpRemote) -> type[BaseHTTPRequestHandler]:
    expected = "Basic " + base64.b64encode(f"{state.username}:{state.password}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def _serve(self) -> None:
            body = _read_body(self) if self.command == "POST" else b""
            if self.headers.get("Authorization") != expected:
                state.rejected += 1
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="test"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            state.authorized.append(self.path)
            path, _, query = self.path.partition("?")
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "GIT_PROJECT_ROOT": str(project_root),
                "GIT_HTTP_EXPORT_ALL": "1",
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "REQUEST_METHOD": self.command,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "REMOTE_USER": state.username,
                "REMOTE_ADDR": "127.0.0.1",
                "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            }
            done = subprocess.run(
                ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
            )
            head, _, payload = done.stdout.partition(b"\r\n\r\n")
            status, headers = 200, []
            for line in head.decode().split("\r\n"):
                key, _, value = line.partition(":")
                if key.lower() == "status":
                    status = int(value.split()[0])
                elif key:
                    headers.append((key, value.strip()))
            self.send_response(status)
            for key, value in headers:
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = _serve
        do_POST = _serve

    return Handler


@pytest.fixture
def http_remote(remote: Remote) -> Iterator[HttpRemote]:
    state = HttpRemote(url="", username="x-access-token", password="fake-token")
    with serving(_handler(remote.bare.parent, state)) as server:
        state.url = f"http://127.0.0.1:{server.server_address[1]}/{remote.bare.name}"
        yield state
