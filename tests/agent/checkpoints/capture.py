"""Capture the fixtures of tests/agent/test_checkpoint_compat.py with the current code.

    .venv/bin/python -m tests.agent.checkpoints.capture [NAME ...]

Run it only to add a scenario: the stored checkpoints are what an older version
wrote, and the compatibility test checks that this version still resumes them.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from bot.record.snapshot import status_snapshot
from tests.agent.checkpoint_scenarios import CHECKPOINTS, SCENARIOS, capture


async def main(names: list[str], commit: str) -> None:
    for scenario in SCENARIOS:
        if names and scenario.name not in names:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            checkpoint = await capture(scenario, Path(tmp))
        stored = {
            "scenario": scenario.name,
            "description": scenario.description,
            "captured_with": commit,
            "checkpoint": checkpoint,
            "status_snapshot": status_snapshot(checkpoint),
        }
        path = CHECKPOINTS / f"{scenario.name}.json"
        path.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(path)


if __name__ == "__main__":
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    asyncio.run(main(sys.argv[1:], head))
