"""One run of ``bot action``: the runner's event in, the task at its next resting point,
the summary and outputs written, the state kept for the next run.

    event file -> ForgeEvent -> classify (nothing to do: skipped, at once)
    -> connect (the GitHub adapter; ``connect`` is injectable) -> the issue's kept state
    -> the inbox -> the dispatcher (permission, decision, replies, task or message)
    -> queued tasks of the issue run here, one after another, to their resting point
    -> pack the state -> summary and outputs

The forge and the model come from ``connect`` and ``make_llm`` (tests give the FakeForge,
a folder carrier and the scripted model); everything between is the App's own code.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import signal
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

from bot.action.checks import model_key_problem, sandbox_problem, sender_problem
from bot.action.connect import Connection, connect_github, identity
from bot.action.environment import ActionError, RunnerEnv, action_settings, with_login
from bot.action.event import complete, read_event
from bot.action.state import StateError, artifact_name, pack, unpack
from bot.action.summary import (
    Conclusion,
    Result,
    conclusion_of,
    outputs,
    summary_markdown,
    write_outputs,
    write_summary,
)
from bot.comments.language import choose_language
from bot.comments.render import Marker, finish, render
from bot.config import ConfigError, Settings, secret_values
from bot.events import ForgeEvent, ForgeKind, IssueRef
from bot.forges.base import Forge, ForgeError
from bot.llm.base import LLM
from bot.record.snapshot import status_snapshot
from bot.runtime import Runtime
from bot.storage.base import ACTIVE_STATES, Store, StoreError, Task, TaskState
from bot.storage.sqlite import DB_FILENAME, SqliteStore
from bot.triggers import Ignore, classify
from bot.webhooks.github import delivery_key
from bot.worker import Worker

log = logging.getLogger("bot.action")

_NOT_HANDLED = (
    "The event could not be handled now (GitHub refused or failed a call; see the log). "
    "It is kept, and handled again with the next run on this issue."
)
_NO_TASK = "No task ran: the event was answered on the issue, or needed nothing."
_CANCELLED = "The run was cancelled; its state is kept."

MAX_RUNS = 5  # task runs in one job (a reply that came in while a task ran re-queues it)
COMMENT_LIMIT = 65_000

Connect = Callable[[Settings, RunnerEnv], AbstractAsyncContextManager[Connection]]
MakeLLM = Callable[[Settings, Store], LLM]


def default_llm(settings: Settings, store: Store) -> LLM:
    from bot.llm.factory import make_llm

    return make_llm(settings.llm, dialects=store)


async def run_action(
    environ: Mapping[str, str],
    *,
    connect: Connect = connect_github,
    make_llm: MakeLLM = default_llm,
) -> int:
    """Run once for the runner's event; the exit code (non-zero: the run failed)."""
    try:
        runner = RunnerEnv.from_environ(environ)
    except ActionError as exc:
        log.error("%s", exc)
        return 2
    run = ActionRun(runner, environ, connect=connect, make_llm=make_llm)
    current = asyncio.current_task()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        if current is not None:  # a cancelled job gets SIGTERM: keep the state all the same
            loop.add_signal_handler(signal.SIGTERM, current.cancel)
    try:
        result = await run.execute()
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signal.SIGTERM)
    run.report(result)
    return result.exit_code


class ActionRun:
    def __init__(
        self, runner: RunnerEnv, environ: Mapping[str, str], *, connect: Connect, make_llm: MakeLLM
    ) -> None:
        self.runner = runner
        self.environ = environ
        self.connect = connect
        self.make_llm = make_llm
        self.settings: Settings | None = None
        self.issue: IssueRef | None = None
        self.notes: list[str] = []

    async def execute(self) -> Result:
        try:
            self.settings = action_settings(self.environ, self.runner)
        except ConfigError as exc:
            return Result(Conclusion.FAILED, reason=f"The configuration is not usable:\n{exc}")
        try:
            event = read_event(self.runner)
        except ActionError as exc:
            return Result(Conclusion.FAILED, reason=str(exc))
        verdict = classify(event, self.settings)
        if isinstance(verdict, Ignore):
            return Result(Conclusion.SKIPPED, reason=f"Nothing to do: {verdict.reason}.")
        try:
            async with self.connect(self.settings, self.runner) as connection:
                return await self._connected(connection, event)
        except (ActionError, ForgeError, StateError, StoreError) as exc:
            return self._result(Conclusion.FAILED, reason=str(exc))
        except asyncio.CancelledError:  # SIGTERM (a cancelled job): the state was kept
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()  # handled here: say so, then end
            return self._result(Conclusion.FAILED, reason=_CANCELLED)

    def _result(
        self,
        conclusion: Conclusion,
        *,
        reason: str = "",
        task_id: str = "",
        state: TaskState | None = None,
        snapshot: dict[str, Any] | None = None,
    ) -> Result:
        return Result(conclusion, reason=reason, issue=self.issue, task_id=task_id, state=state,
                      snapshot=snapshot or {}, notes=list(self.notes))  # fmt: skip

    async def _connected(self, connection: Connection, event: ForgeEvent) -> Result:
        assert self.settings is not None
        settings = self.settings = with_login(self.settings, await identity(connection.forge))
        event = await complete(event, connection.forge)
        assert event.issue is not None
        self.issue = issue = event.issue
        data_dir = settings.data_dir
        for folder in (data_dir, self.runner.incoming):
            shutil.rmtree(folder, ignore_errors=True)
        untrusted = await sender_problem(connection.forge, event)
        if untrusted is not None:
            self.notes.append(untrusted)
        elif fetched := await connection.carrier.fetch(issue.number, self.runner.incoming):
            unpack(self.runner.incoming, data_dir)
            self.notes.append(f"Resumed from the state kept in {fetched}.")
        store = SqliteStore(data_dir / DB_FILENAME)
        runtime = Runtime(settings, store=store, forges={ForgeKind.GITHUB: connection.forge},
                          llm=self.make_llm(settings, store))  # fmt: skip
        resting: list[str] = []
        try:
            await store.open()
            result = await self._work(runtime, connection.forge, event, trusted=untrusted is None)
        finally:  # also when the job is cancelled: what the next run needs is kept
            with contextlib.suppress(Exception):  # a store that did not open keeps nothing
                resting = [t.id for t in await store.list_tasks(states=ACTIVE_STATES, limit=1000)]
            with contextlib.suppress(Exception):
                await runtime.stop()
            if untrusted is None:
                await self._keep(connection, issue.number, resting)
        result.notes = list(self.notes)
        return result

    async def _keep(self, connection: Connection, number: int, resting: list[str]) -> None:
        """Pack what the next run needs and hand it to the carrier; the step's outputs name
        the folder so ``action.yml`` uploads it even when the run fails afterwards."""
        assert self.settings is not None
        packed = self.runner.state_dir
        self.notes += pack(self.settings.data_dir, packed, workspaces=resting)
        where = await connection.carrier.keep(number, packed)
        kept = {"state_dir": str(packed), "state_artifact": artifact_name(number)}
        write_outputs(self.runner.output, kept)
        self.notes.append(f"The state is kept as {where}.")

    async def _work(
        self, runtime: Runtime, forge: Forge, event: ForgeEvent, *, trusted: bool
    ) -> Result:
        """Dispatch the event; then, unless its sender may not steer, run the issue's
        queued tasks."""
        store = runtime.store
        worker = Worker(runtime, owner=self.runner.run_key)
        if trusted:
            await _requeue_left_over(store)
        key = delivery_key(self.runner.run_key, None, b"")
        await store.record_delivery(key, event.forge.value, event.to_dict())
        while await worker.dispatch_once():
            pass
        if await store.pending_events():
            return self._result(Conclusion.FAILED, reason=_NOT_HANDLED)
        if not trusted:
            return await self._outcome(store, None)
        queued = await store.list_tasks(states=frozenset({TaskState.QUEUED}), limit=1000)
        if not queued:
            return await self._outcome(store, None)
        problem = model_key_problem(runtime.settings) or await sandbox_problem(
            runtime.settings, self.runner.root / "probe"
        )
        if problem is not None:
            await self._say_on_issue(forge, queued[0], problem)
            return await self._outcome(store, queued[0].id, failed=problem)
        last: str | None = None
        for _ in range(MAX_RUNS):
            task = await worker.lease_next()
            if task is None:
                break
            await worker.run_task(task)
            last = task.id
        return await self._outcome(store, last)

    async def _outcome(self, store: Store, task_id: str | None, failed: str = "") -> Result:
        task = await store.get_task(task_id) if task_id else None
        if task is None:
            return self._result(Conclusion.SKIPPED, reason=_NO_TASK)
        snapshot = status_snapshot(await store.load_checkpoint(task.id)) or {}
        conclusion = Conclusion.FAILED if failed else conclusion_of(task.state)
        reason = failed or (task.error or "")
        return self._result(conclusion, reason=reason, task_id=task.id, state=task.state,
                            snapshot=snapshot)  # fmt: skip

    async def _say_on_issue(self, forge: Forge, task: Task, problem: str) -> None:
        """One comment on the issue: why nothing ran, and that the request is kept."""
        assert self.settings is not None
        issue = task.request.issue
        language = choose_language(self.settings, f"{issue.title}\n{issue.body}")
        body = render("action_error", language, reason=problem, run_url=self.runner.run_url)
        seq = int(self.runner.run_id) if self.runner.run_id.isdigit() else 0
        text = finish(body, marker=Marker(task.id, "action-error", seq), language=language,
                      max_length=COMMENT_LIMIT, secrets=secret_values(self.settings))  # fmt: skip
        try:
            await forge.create_comment(issue, text)
        except ForgeError as exc:
            log.warning("could not say on %s why nothing ran: %s", issue.key, exc)

    def report(self, result: Result) -> None:
        """The step summary and outputs; the log's last line."""
        settings = self.settings
        secrets = secret_values(settings) if settings is not None else ()
        language = "en"
        if settings is not None and result.issue is not None:
            language = choose_language(settings, f"{result.issue.title}\n{result.issue.body}")
        text = summary_markdown(result, language=language, run_url=self.runner.run_url,
                                secrets=secrets)  # fmt: skip
        try:
            write_summary(self.runner.step_summary, text)
            write_outputs(self.runner.output, outputs(result))
        except OSError as exc:
            log.error("could not write the step summary or outputs: %s", exc)
        level = logging.ERROR if result.exit_code else logging.INFO
        log.log(level, "coding agent: %s %s", result.conclusion.value, result.reason)


async def _requeue_left_over(store: Store) -> None:
    """A task still running in the kept state belongs to a run that was cut short (the
    issue's runs take turns): it goes on now, from its checkpoint. Waiting tasks whose
    time has come (an approval that timed out, a paused task's wake-up) go on too."""
    for task in await store.list_tasks(states=frozenset({TaskState.RUNNING}), limit=1000):
        await store.set_state(task.id, TaskState.QUEUED, error=task.error,
                              expect_state=TaskState.RUNNING)  # fmt: skip
    for task in await store.due_tasks(time.time()):
        await store.set_state(task.id, TaskState.QUEUED, error=task.error,
                              expect_state=task.state)  # fmt: skip
