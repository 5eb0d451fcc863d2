"""Set-up before work: prepare the fresh clone so the project can be built and tested.

``Preparer.prepare`` clones the repository (if no tool has yet), plans the set-up
(``setup_plan``: the repository's ``setup:`` or detected commands), and then either
finds the workspace prepared by an earlier run (a marker in ``.git``, which no command
can write), restores the environment from the cache (``setup_cache``: the installs are
skipped; nothing is written through a link), or runs the commands one by one in the
sandbox (``setup_steps``) WITH network (through the egress proxy: the package indexes
only), without any credential of the bot's, with the host's package-manager
configuration (``setup_env``), within ``sandbox.setup_timeout`` for all of them.

Set-up runs with network, and its result is cached, only on what the base branch
holds: whatever set-up executes (the scripts it names, what they call, a Makefile's
includes, package scripts, an in-tree build backend, code a build imports) then comes
from the base branch. When the working tree is the base branch's as it is, set-up runs
in the workspace. When it differs (the bot's own branch on a follow-up: model output),
set-up runs in a clean checkout of the base branch's commit (``setup_base``), its
result is cached under that checkout's key (``setup_key``) and copied into the working
tree (``setup_cache.copy_environment``: nothing written through a link). If what set-up
depends on differs between the two (``setup_key.differences``: a manifest, a lock file,
a script set-up runs, the commands), the working tree's own set-up then runs on top,
WITHOUT network, and is not cached; when it fails (a dependency the branch adds cannot
be installed offline), the result says why in ``hints`` for the issue. When no base
checkout can be made, the working tree is set up offline as it is, and not cached.

A workspace is set up once: what the agent changes later is never set up. What set-up
leaves in the workspace (``.venv``, ``node_modules``, ...) is excluded from the agent's
commits (``.git/info/exclude``) and cached.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from bot.forges.base import ForgeError
from bot.sandbox.gitcmd import WorkspaceError
from bot.sandbox.safe_tree import TreeRefused
from bot.sandbox.sandbox import Sandbox, SandboxUnavailable
from bot.sandbox.setup_base import (
    BaseCheckout,
    BaseUnavailable,
    Bounds,
    base_folder,
    changed_tracked,
    check_out,
    made_paths,
)
from bot.sandbox.setup_cache import SetupCache, copy_environment
from bot.sandbox.setup_env import PackageConfig
from bot.sandbox.setup_key import SetupInputs, differences, setup_inputs
from bot.sandbox.setup_mark import exclude, read_marker, write_marker
from bot.sandbox.setup_plan import Argv, SetupPlan, Which, plan_setup
from bot.sandbox.setup_result import SetupResult, SetupStatus, SetupStep
from bot.sandbox.setup_steps import StepRunner
from bot.sandbox.workspace import Workspace

__all__ = ["Preparer", "SetupResult", "SetupStatus", "SetupStep"]

NAMED_CHANGES = 10  # the changed paths a note names
# Quiet, non-interactive installers; the host's configuration comes on top.
SETUP_ENV = {
    "PIP_NO_INPUT": "1",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "PIP_PROGRESS_BAR": "off",
    "npm_config_update_notifier": "false",
    "npm_config_progress": "false",
}


@dataclass(frozen=True, slots=True)
class _Earlier:
    """What set-up did in the base checkout before the working tree's own commands."""

    steps: tuple[SetupStep, ...] = ()
    paths: tuple[str, ...] = ()
    commit: str = ""
    key: str = ""
    hints: tuple[str, ...] = ()


@dataclass
class Preparer:
    """Prepares one task's workspace; ``sandbox`` makes the set-up sandbox (the given
    configuration files shown; network or not) and ``package`` reads the host's
    configuration."""

    workspace: Workspace
    configured: tuple[Argv, ...] | None
    sandbox: Callable[[tuple[Path, ...], bool], Sandbox]
    package: Callable[[], PackageConfig]
    cache: SetupCache | None
    timeout: float
    which: Which
    clock: Callable[[], float] = time.monotonic

    async def prepare(self, *, log_dir: Path | None = None) -> SetupResult:
        started = self.clock()
        try:
            root = await self.workspace.ensure()
        except (WorkspaceError, ForgeError) as exc:
            return SetupResult(SetupStatus.UNAVAILABLE, error=f"no clone: {exc}")
        plan = await asyncio.to_thread(plan_setup, root, self.configured, which=self.which)
        if not plan.commands:
            return SetupResult(SetupStatus.NOTHING, plan.source, notes=plan.notes)
        marker = await asyncio.to_thread(read_marker, root)
        if marker:  # set up by an earlier run; changes since are the agent's, never set up
            key = str(marker.get("key", ""))
            return SetupResult(SetupStatus.READY, plan.source, key, paths=tuple(marker["paths"]))
        inputs = await asyncio.to_thread(setup_inputs, root, plan, which=self.which)
        restored = await self._restore(inputs.key, root)
        if restored is not None:
            await self._finish(root, inputs.key, restored)
            return SetupResult(SetupStatus.RESTORED, plan.source, inputs.key,
                               duration=self.clock() - started, paths=tuple(restored),
                               notes=plan.notes)  # fmt: skip
        runner = StepRunner(log_dir, started, self.timeout, self.clock)
        changed = await self.workspace.differs_from_base()
        if not changed:
            return await self._run(plan, inputs.key, root, runner, network=True)
        return await self._from_base(plan, inputs, root, changed, runner)

    async def _restore(self, key: str, root: Path) -> list[str] | None:
        if self.cache is None:
            return None
        return await asyncio.to_thread(self.cache.restore, key, root)

    async def _run(
        self,
        plan: SetupPlan,
        key: str,
        root: Path,
        runner: StepRunner,
        *,
        network: bool,
        notes: tuple[str, ...] = (),
        earlier: _Earlier = _Earlier(),
    ) -> SetupResult:
        """Run ``plan`` in the working tree; with network it is cached."""
        before = set(await self.workspace.untracked())
        package = await asyncio.to_thread(self.package)
        sandbox = self.sandbox(package.expose, network)
        notes = (*plan.notes, *_left_out(package), *notes)
        env = {**SETUP_ENV, **package.env}
        done = functools.partial(SetupResult, source=plan.source, key=key,
                                 base_commit=earlier.commit, base_key=earlier.key)  # fmt: skip
        try:
            steps = await runner.run(sandbox, plan.commands, root, env)
        except SandboxUnavailable as exc:  # the agent's commands cannot run either
            return done(SetupStatus.SKIPPED, error=str(exc))
        steps = [*earlier.steps, *steps]
        took = runner.elapsed()
        if not steps[-1].ok:
            return done(SetupStatus.FAILED, steps=tuple(steps), duration=took, notes=notes,
                        hints=earlier.hints)  # fmt: skip
        made = sorted(set(await self.workspace.untracked()) - before)
        paths = sorted({*earlier.paths, *made})
        await asyncio.to_thread(exclude, root, paths)
        if network and await self.workspace.changed_files():
            notes = (*notes, "set-up changed files of the repository: its result is not cached")
        elif network and self.cache is not None:
            await asyncio.to_thread(self.cache.store, key, root, made)
        await asyncio.to_thread(write_marker, root, key, paths)
        return done(SetupStatus.RAN, steps=tuple(steps), duration=took, paths=tuple(paths),
                    notes=notes)  # fmt: skip

    async def _from_base(
        self,
        plan: SetupPlan,
        inputs: SetupInputs,
        root: Path,
        changed: list[str],
        runner: StepRunner,
    ) -> SetupResult:
        """Set up in a checkout of the base branch, with network; the working tree gets
        its environment (and, if what set-up depends on differs, its own set-up offline)."""
        package = await asyncio.to_thread(self.package)
        sandbox = self.sandbox(package.expose, True)
        settings = sandbox.settings
        bounds = Bounds(settings.workspace_mb << 20, settings.workspace_files)
        async with base_folder(self.workspace.path) as folder:
            try:
                base = await check_out(self.workspace, folder, bounds)
            except BaseUnavailable as exc:
                why = f"no checkout of the base branch could be made ({exc})"
                return await self._offline(plan, inputs.key, root, runner, changed, why)
            return await self._on_base(base, sandbox, package, plan, inputs, root, changed,
                                       runner)  # fmt: skip

    async def _on_base(
        self,
        base: BaseCheckout,
        sandbox: Sandbox,
        package: PackageConfig,
        plan: SetupPlan,
        inputs: SetupInputs,
        root: Path,
        changed: list[str],
        runner: StepRunner,
    ) -> SetupResult:
        where = f"a clean checkout of {base.branch} at {base.commit[:12]}"
        base_plan = await asyncio.to_thread(plan_setup, base.root, self.configured,
                                            which=self.which)  # fmt: skip
        if not base_plan.commands:
            why = f"the base branch {base.branch} has nothing to set up"
            return await self._offline(plan, inputs.key, root, runner, changed, why)
        base_inputs = await asyncio.to_thread(setup_inputs, base.root, base_plan,
                                              which=self.which)  # fmt: skip
        earlier = _Earlier(commit=base.commit, key=base_inputs.key)
        notes = [f"the working tree differs from the base branch ({_named(changed)}): set-up "
                 f"ran with network in {where}, and its environment was copied in"]  # fmt: skip
        cached = await self._restore(base_inputs.key, root)
        if cached is not None:
            paths = cached
        else:
            env = {**SETUP_ENV, **package.env}
            try:
                steps = await runner.run(sandbox, base_plan.commands, base.root, env, base=True)
            except SandboxUnavailable as exc:
                return SetupResult(SetupStatus.SKIPPED, plan.source, inputs.key, error=str(exc))
            hint = (f"Set-up ran with network in {where} (the bot's branch is never set up "
                    "with network): the base branch's own set-up fails there.")  # fmt: skip
            earlier = replace(earlier, steps=tuple(steps), hints=(hint,))
            if not steps[-1].ok:
                return SetupResult(
                    SetupStatus.FAILED, base_plan.source, inputs.key, tuple(steps),
                    runner.elapsed(), notes=(*base_plan.notes, *_left_out(package)),
                    base_commit=base.commit, base_key=base_inputs.key, hints=(hint,),
                )  # fmt: skip
            carried = await self._carry(base, base_inputs.key, root, notes)
            if isinstance(carried, str):
                return await self._offline(plan, inputs.key, root, runner, changed, carried,
                                           replace(earlier, hints=()))  # fmt: skip
            paths = carried
        earlier = replace(earlier, paths=tuple(paths))
        differs = differences(base_inputs, inputs)
        if not differs:
            await self._finish(root, inputs.key, paths)
            status = SetupStatus.RAN if earlier.steps else SetupStatus.RESTORED
            return SetupResult(status, plan.source, inputs.key, earlier.steps, runner.elapsed(),
                               tuple(paths), (*plan.notes, *notes), base_commit=base.commit,
                               base_key=base_inputs.key)  # fmt: skip
        what = _named(differs)
        notes.append(f"the bot's branch changes what set-up installs or runs ({what}): its own "
                     "set-up ran on top without network and is not cached")  # fmt: skip
        hint = (
            f"The bot's branch changes what set-up installs or runs ({what}). Set-up installs "
            f"with network only what the base branch holds (it did, in {where}); the branch's "
            "own set-up then ran without network and failed: a dependency the branch adds or "
            f"changes cannot be installed that way. Land that change on {base.branch} (or undo "
            "it on the bot's branch), then retry."
        )
        return await self._run(plan, inputs.key, root, runner, network=False, notes=tuple(notes),
                               earlier=replace(earlier, hints=(hint,)))  # fmt: skip

    async def _carry(
        self, base: BaseCheckout, key: str, root: Path, notes: list[str]
    ) -> list[str] | str:
        """Cache what set-up made in the base checkout and copy it into the working tree;
        the paths copied, or why they could not be."""
        try:
            made = await made_paths(base)
            if await changed_tracked(base):
                notes.append("set-up changed files of the base branch: its result is not cached")
            elif self.cache is not None:
                await asyncio.to_thread(self.cache.store, key, base.root, made)
        except BaseUnavailable as exc:
            return f"what set-up made in the base checkout could not be listed ({exc})"
        old = str(base.root.resolve())
        try:
            await asyncio.to_thread(copy_environment, base.root, old, made, root)
        except (OSError, TreeRefused) as exc:
            return f"its environment could not be copied in ({exc})"
        return made

    async def _offline(
        self,
        plan: SetupPlan,
        key: str,
        root: Path,
        runner: StepRunner,
        changed: list[str],
        why: str,
        earlier: _Earlier = _Earlier(),
    ) -> SetupResult:
        """The working tree as it is, without network and not cached."""
        note = (f"set-up ran without network and is not cached: the working tree differs from "
                f"the base branch ({_named(changed)}) and {why}")  # fmt: skip
        return await self._run(plan, key, root, runner, network=False, notes=(note,),
                               earlier=earlier)  # fmt: skip

    async def _finish(self, root: Path, key: str, paths: list[str]) -> None:
        await asyncio.to_thread(exclude, root, paths)
        await asyncio.to_thread(write_marker, root, key, paths)


def _named(paths: list[str]) -> str:
    shown = ", ".join(paths[:NAMED_CHANGES])
    more = len(paths) - NAMED_CHANGES
    return f"{shown} and {more} more" if more > 0 else shown


def _left_out(package: PackageConfig) -> list[str]:
    return [f"not passed to set-up: {why}" for why in package.left_out]
