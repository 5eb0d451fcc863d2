"""``bot eval status RUN``: how far a run folder has got, read from the folder alone.

A task is done when its line is in ``results.jsonl``; started when its ``tasks/ID`` folder
exists and it is not done (running now, or left by an interrupted run: ``--resume`` starts
it again); queued when neither. The number of tasks comes from ``run.json`` (a folder
written before it was kept there says "total unknown").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from bot.eval.results import read_results
from bot.eval.run_meta import RUN_META, read_meta


class NotARun(Exception):
    """The folder is not a run folder (no ``run.json``)."""


@dataclass(frozen=True)
class RunStatus:
    model: str
    total: int | None
    done: int
    started: tuple[str, ...]
    resolved: int
    tokens: int
    cost: float
    queued_run: bool = False  # ``--queue``: the store says where its tasks are

    @property
    def queued(self) -> int | None:
        if self.total is None:
            return None
        return max(0, self.total - self.done - len(self.started))

    def line(self) -> str:
        total = "total unknown" if self.total is None else f"of {self.total}"
        queued = "?" if self.queued is None else str(self.queued)
        started = ", ".join(self.started) or "none"
        return (f"model {self.model}; done {self.done} {total}, started {len(self.started)}, "
                f"queued {queued}; resolved {self.resolved}; tokens {self.tokens:,}; "
                f"cost ${self.cost:.4f}; started, not finished: {started}")  # fmt: skip


def run_status(folder: Path) -> RunStatus:
    """The run's progress; raises ``NotARun`` for a folder that holds no run."""
    meta_path = folder / RUN_META
    if not meta_path.is_file():
        raise NotARun(f"{folder} is not a run folder (no {RUN_META})")
    try:
        meta = read_meta(folder)
    except json.JSONDecodeError:
        raise NotARun(f"{meta_path} is not JSON") from None
    except ValueError:
        raise NotARun(f"{meta_path} is not a run's description") from None
    results = read_results(folder)
    done = {r.instance_id for r in results}
    tasks = folder / "tasks"
    folders = sorted(p.name for p in tasks.iterdir() if p.is_dir()) if tasks.is_dir() else []
    return RunStatus(
        model=meta.model,
        total=meta.total,
        done=len(results),
        started=tuple(name for name in folders if name not in done),
        resolved=sum(r.resolved for r in results),
        tokens=sum(r.tokens for r in results),
        cost=sum(r.cost for r in results),
        queued_run=meta.queue,
    )
