"""The egress proxy behind the host's own HTTP proxy (issue 27, item 2), end to end: a
real tinyproxy started by the test as the host's proxy, real bubblewrap, and the requests
sent from inside the sandbox by a set-up command, as set-up runs them.

The host's proxy reads a request again with its own parser: tinyproxy takes the host
after the FIRST ``@`` of ``http://a@127.0.0.1:PORT@idx.test/`` (Python's parser the
last) and reads past a ``#``; and it resolves a name again itself. A listener on the
host's loopback must receive nothing for any of these, while the allowed index host
still answers through the host's proxy (tinyproxy sends ``idx.test`` on to a stand-in
index on loopback, its ``Upstream`` for that name, so nothing here leaves the machine).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from bot.config import SandboxSettings
from bot.sandbox.setup import SetupStatus
from tests.loopback import serving
from tests.tools.test_setup import _preparer, _workspace

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing"),
    pytest.mark.skipif(
        shutil.which("tinyproxy") is None,
        reason="tinyproxy missing (the host's upstream proxy of this test: apt-get install "
        "tinyproxy)",
    ),
]

INDEX = "idx.test"  # an allowed index host; the proxy's look-up gives it a public address

PROBE = r"""
import json, os, socket, sys
port = int(os.environ["http_proxy"].rsplit(":", 1)[1])
for name, request, then in json.loads(sys.argv[1]):
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(request.encode("latin-1"))
        answer = b""
        while b"\r\n\r\n" not in answer:
            data = s.recv(4096)
            if not data:
                break
            answer += data
        if then:
            s.sendall(then.encode())
        s.settimeout(5)
        try:
            while data := s.recv(4096):
                answer += data
        except OSError:
            pass
    status = answer.split(b" ", 2)[1].decode() if answer.count(b" ") >= 2 else "none"
    print(name, status, answer.rsplit(b"\r\n\r\n", 1)[-1].decode("latin-1"), flush=True)
"""


class _Index(BaseHTTPRequestHandler):
    """The stand-in index, as tinyproxy's upstream for ``idx.test``: a proxy request in,
    the page (or a tunnel that echoes) out."""

    seen: list[str]

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.seen.append(f"GET {self.path} Host={self.headers.get('Host')}")
        body = b"index-page"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def do_CONNECT(self) -> None:
        self.seen.append(f"CONNECT {self.path}")
        self.send_response(200, "Connection established")
        self.end_headers()
        self.wfile.write(b"tunnel:" + self.connection.recv(100))
        self.close_connection = True


@pytest.fixture
def index() -> Iterator[tuple[int, list[str]]]:
    seen: list[str] = []
    with serving(type("Index", (_Index,), {"seen": seen})) as server:
        yield server.server_address[1], seen


@pytest.fixture
def listener() -> Iterator[tuple[int, list[bytes]]]:
    """A raw listener on the host's loopback: every connection it accepts is a hit."""
    server = socket.create_server(("127.0.0.1", 0))
    hits: list[bytes] = []

    def accept() -> None:
        with contextlib.suppress(OSError):  # the socket closes under a waiting accept()
            while True:
                conn, _ = server.accept()
                with conn:
                    conn.settimeout(2)
                    with contextlib.suppress(OSError):
                        hits.append(conn.recv(4096))
                        conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 7\r\n\r\nreached")

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield server.getsockname()[1], hits
    finally:
        server.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def tinyproxy(tmp_path: Path, index: tuple[int, list[str]]) -> Iterator[int]:
    """The host's own HTTP proxy: tinyproxy on a free loopback port, which sends requests
    for ``idx.test`` on to the stand-in index and connects to anything else itself."""
    port = _free_port()
    conf = tmp_path / "tinyproxy.conf"
    conf.write_text(
        f"Port {port}\nListen 127.0.0.1\nTimeout 30\nMaxClients 20\nAllow 127.0.0.1\n"
        f'LogFile "{tmp_path / "tinyproxy.log"}"\nLogLevel Info\nDisableViaHeader Yes\n'
        f'Upstream http 127.0.0.1:{index[0]} "{INDEX}"\n'
    )
    binary = shutil.which("tinyproxy")
    assert binary is not None
    process = subprocess.Popen(
        [binary, "-d", "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                log = tmp_path / "tinyproxy.log"
                pytest.fail(f"tinyproxy did not start: {log.read_text() if log.exists() else ''}")
            time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        process.wait(10)


async def test_behind_the_hosts_proxy_set_up_reaches_the_index_and_never_the_hosts_loopback(
    tmp_path: Path,
    tinyproxy: int,
    index: tuple[int, list[str]],
    listener: tuple[int, list[bytes]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port, hits = listener
    for name in ("HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{tinyproxy}")
    for name in ("NO_PROXY", "no_proxy", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no pip or npm file of this machine

    async def resolve(host: str, _port: int) -> list[str]:
        """This host's resolver: it knows the index (at a public address), nothing else."""
        if host == INDEX:
            return ["203.0.113.7"]
        raise OSError(f"{host}: name not known here")

    hostile = {
        "double-at": f"GET http://a@127.0.0.1:{port}@{INDEX}/ HTTP/1.1\r\n\r\n",
        "fragment-at": f"GET http://{INDEX}#@127.0.0.1:{port}/ HTTP/1.1\r\n\r\n",
        "tab-at": f"GET http://127.0.0.1:{port}\t@{INDEX}/ HTTP/1.1\r\n\r\n",
        "backslash": f"GET http://{INDEX}\\@127.0.0.1:{port}/ HTTP/1.1\r\n\r\n",
        "connect-at": f"CONNECT 127.0.0.1:{port}@x.{INDEX}:443 HTTP/1.1\r\n\r\n",
        "not-resolved-here": f"GET http://localhost:{port}/ HTTP/1.1\r\n\r\n",
        "nat64": f"GET http://[64:ff9b::7f00:1]:{port}/ HTTP/1.1\r\n\r\n",
    }
    allowed = {  # the query's "@" stays in the path of the rebuilt URL; Host is rebuilt
        "index": (f"GET http://{INDEX}/simple/ HTTP/1.1\r\nHost: {INDEX}\r\n\r\n", ""),
        "query-at": (f"GET http://{INDEX}?@127.0.0.1:{port}/ HTTP/1.1\r\n\r\n", ""),
        "host-header": (f"GET http://{INDEX}/x HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n", ""),
        "tunnel": (f"CONNECT {INDEX}:443 HTTP/1.1\r\n\r\n", "hello"),
    }
    requests = [(name, text, "") for name, text in hostile.items()]
    requests += [(name, text, then) for name, (text, then) in allowed.items()]
    settings = SandboxSettings(
        timeout=120,
        max_output_chars=20_000,
        # the operator's allowed hosts, mistakes included: localhost and any *.idx.test
        egress_allow=(INDEX, f"*.{INDEX}", f"localhost:{port}"),
    )
    ws = _workspace(tmp_path, "task", {"README.md": b"hi\n"})
    probe = (("python3", "-c", PROBE, json.dumps(requests)),)
    result = await _preparer(
        ws, tmp_path / "cache", probe, sandbox_settings=settings, resolve=resolve
    ).prepare(log_dir=tmp_path / "run")
    assert result.status is SetupStatus.RAN, result.failure
    log = (tmp_path / "run" / "01-python3.log").read_text()
    answers = {line.split()[0]: line.split()[1:] for line in log.splitlines() if " " in line}
    assert hits == [], log  # the host's loopback received nothing
    for name in hostile:
        assert answers[name][0] in {"400", "403"}, (name, log)
    assert answers["not-resolved-here"][0] == "403" and "cannot be resolved here" in log
    assert answers["nat64"][0] == "403"
    for name in ("index", "query-at", "host-header"):
        assert answers[name] == ["200", "index-page"], (name, log)
    assert answers["tunnel"] == ["200", "tunnel:hello"], log
    _, seen = index
    assert f"GET http://{INDEX}:80/?@127.0.0.1:{port}/ Host={INDEX}" in seen, seen
    assert f"GET http://{INDEX}:80/x Host={INDEX}" in seen, seen
    assert f"CONNECT {INDEX}:443" in seen, seen
