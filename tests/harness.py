"""The bot, end to end, in one process: the ASGI app, a real SQLite store, the one
FakeForge per forge, the scripted LLM, and a worker driven step by step."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from bot.app import create_app
from bot.change_state import ReviewThread, ThreadComment
from bot.config import Settings, load_settings
from bot.events import ForgeKind, RepoRef
from bot.forges.base import Comment
from bot.llm.scripted import ScriptedLLM
from bot.runtime import Runtime
from bot.storage.base import Task
from bot.storage.sqlite import SqliteStore
from bot.worker import Coordinator, Worker, default_coordinator
from bot.worker.hooks import TaskHook
from tests.fakes import FakeForge

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
GITHUB_SECRET = "gh-webhook-secret"
GITLAB_SECRET = "gl-webhook-secret"


def fixture(forge: str, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / forge / name).read_text(encoding="utf-8"))
    return data


def github_signature(body: bytes, secret: str = GITHUB_SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def bot_environment(tmp_path: Path, script: Sequence[object] = ()) -> dict[str, str]:
    script_path = tmp_path / "script.json"
    script_path.write_text(json.dumps(list(script)))
    config = tmp_path / "config.yaml"  # the bot's own copy: PUT /api/config replaces it
    if not config.exists():  # the repository's, with the model the harness runs
        text = (ROOT / "config.yaml").read_text(encoding="utf-8")
        text = text.replace("\n  provider: openai ", "\n  provider: scripted ", 1)
        text = text.replace("\n  script_path: null ", f"\n  script_path: {script_path} ", 1)
        config.write_text(text, encoding="utf-8")
    return {
        "BOT_CONFIG": str(config),
        "BOT_DATA_DIR": str(tmp_path / "data"),
        "GITHUB_WEBHOOK_SECRET": GITHUB_SECRET,
        "GITHUB_TOKEN": "ghp_" + "T" * 36,
        "GITLAB_TOKEN": "glpat-" + "G" * 20,
        "GITLAB_WEBHOOK_SECRET": GITLAB_SECRET,
    }


THREAD_NOTES = ("DiffNote", "DiscussionNote")  # notes in a merge request's discussions


def store_discussion(
    forge: FakeForge, repo: RepoRef, iid: int, attrs: dict[str, Any], author: str
) -> None:
    """A note in a discussion of a merge request, as GitLab keeps it: the discussion
    (``discussion_id``) gains it, or starts with it (on its line of the diff)."""
    threads = forge.change(repo, iid).threads
    comment = ThreadComment(id=attrs["id"], author=author, body=attrs.get("note") or "")
    for index, thread in enumerate(threads):
        if thread.id == attrs.get("discussion_id"):
            threads[index] = replace(thread, comments=(*thread.comments, comment))
            return
    position = attrs.get("position") or {}
    threads.append(
        ReviewThread(
            id=str(attrs.get("discussion_id") or f"discussion-{attrs['id']}"),
            comments=(comment,),
            path=position.get("new_path"),
            line=position.get("new_line"),
        )
    )


def store_as_gitlab(forge: FakeForge, event: str, payload: dict[str, Any]) -> None:
    """What GitLab holds when it sends this hook: the note on its issue or merge request
    as the hook tells it, an issue's labels as the hook says. Unknown issues are left alone."""
    project = (payload.get("project") or {}).get("path_with_namespace")
    attrs = payload.get("object_attributes") or {}
    if "Note Hook" in event:
        noteable = payload.get("merge_request") or payload.get("issue") or {}
        fake = forge.issues.get((project, noteable.get("iid")))
        if fake is None:
            return
        author = (payload.get("user") or {}).get("username", "")
        internal = bool(attrs.get("internal") or attrs.get("confidential"))
        note = Comment(attrs["id"], attrs.get("note") or "", author, internal=internal)
        fake.comments = [c for c in fake.comments if c.id != note.id] + [note]
        if payload.get("merge_request") and attrs.get("type") in THREAD_NOTES:
            store_discussion(forge, fake.ref.repo, noteable["iid"], attrs, author)
    elif "Issue Hook" in event or event == "Merge Request Hook":
        fake = forge.issues.get((project, attrs.get("iid")))
        labels = attrs.get("labels") if attrs.get("labels") is not None else payload.get("labels")
        if fake is not None and labels is not None:
            titles = [label["title"] for label in labels]
            who = (payload.get("user") or {}).get("username", "")
            fake.label_events += [(who, title) for title in titles if title not in fake.labels]
            fake.labels = titles


class Harness:
    def __init__(
        self,
        tmp_path: Path,
        *,
        script: Sequence[object] = (),
        overrides: dict[str, Any] | None = None,
        coordinator_factory: Callable[[], Coordinator] = default_coordinator,
        clock: Callable[[], float] | None = None,
        hook: TaskHook | None = None,
    ) -> None:
        env = bot_environment(tmp_path, script)
        settings = load_settings(env, env["BOT_CONFIG"])
        self.env = env
        llm_settings = settings.llm.model_copy(
            update={"provider": "scripted", "script_path": tmp_path / "script.json"}
        )
        settings = settings.model_copy(update={"llm": llm_settings})
        for section, values in (overrides or {}).items():
            current = getattr(settings, section)
            settings = settings.model_copy(update={section: current.model_copy(update=values)})
        self.settings: Settings = settings
        self.github = FakeForge(ForgeKind.GITHUB, bot_login=settings.bot.github_login)
        self.gitlab = FakeForge(ForgeKind.GITLAB, bot_login=settings.bot.gitlab_username)
        self.store = (
            SqliteStore(settings.data_dir / "bot.sqlite3", clock=clock)
            if clock
            else SqliteStore(settings.data_dir / "bot.sqlite3")
        )
        self.llm = ScriptedLLM(list(script))
        self.runtime = Runtime(
            settings,
            store=self.store,
            forges={ForgeKind.GITHUB: self.github, ForgeKind.GITLAB: self.gitlab},
            llm=self.llm,
            clock=clock,
        )
        # what makes the coordinator of each run (a test may swap it between runs)
        self.coordinator_factory = coordinator_factory
        self.worker = Worker(
            self.runtime,
            coordinator_factory=lambda: self.coordinator_factory(),
            owner="test",
            hook=hook,
        )
        self.app = create_app(self.runtime, worker=self.worker, manage_runtime=False, environ=env)
        self.client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app), base_url="http://bot.test"
        )

    async def __aenter__(self) -> Harness:
        await self.store.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.aclose()
        await self.store.close()

    async def send_github(
        self,
        event: str,
        payload: dict[str, Any],
        *,
        delivery: str | None = None,
        secret: str = GITHUB_SECRET,
    ) -> httpx.Response:
        body = json.dumps(payload).encode()
        headers = {
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
            "X-Hub-Signature-256": github_signature(body, secret),
            "Content-Type": "application/json",
        }
        return await self.client.post("/webhooks/github", content=body, headers=headers)

    async def send_gitlab(
        self,
        event: str,
        payload: dict[str, Any],
        *,
        token: str = GITLAB_SECRET,
        idempotency_key: str | None = None,
        stored: bool = True,
    ) -> httpx.Response:
        """Deliver a hook as GitLab does; ``stored``: GitLab keeps what the hook tells
        (the note, the labels) in the FakeForge, where the bot reads it back. A forged
        delivery (``stored=False``) tells what GitLab does not have."""
        if stored:
            store_as_gitlab(self.gitlab, event, payload)
        headers = {
            "X-Gitlab-Event": event,
            "X-Gitlab-Token": token,
            "X-Gitlab-Event-UUID": str(uuid.uuid4()),
            "Content-Type": "application/json",
        }
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        return await self.client.post(
            "/webhooks/gitlab", content=json.dumps(payload).encode(), headers=headers
        )

    async def dispatch_all(self) -> int:
        handled = 0
        while await self.worker.dispatch_once():
            handled += 1
        return handled

    async def run_queued(self, limit: int = 20) -> list[Task]:
        """Lease and run queued tasks until none is left; returns the tasks run."""
        ran = []
        for _ in range(limit):
            task = await self.worker.lease_next()
            if task is None:
                break
            await self.worker.run_task(task)
            ran.append(task)
        return ran

    async def tasks(self) -> list[Task]:
        return await self.store.list_tasks(limit=1000)
