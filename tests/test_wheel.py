"""The wheel installs a working bot: prompts and comment templates ship inside it.

The wheel is built from a copy of what the image copies (deploy/Dockerfile), installed
without ``-e`` into a fresh virtualenv, and exercised from that virtualenv's python with the
checkout out of reach. Its dependencies come from this (the dev) virtualenv through a ``.pth``
line: such a directory joins ``sys.path``, but its own ``.pth`` files (the editable install's
finder among them) are not run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "bot", "prompts")
TEMPLATES = Path("bot/comments/templates")
PROBE = ROOT / "tests" / "wheel_probe.py"
PIP = (sys.executable, "-m", "pip")
TIMEOUT = 120


def _run(*argv: str | Path, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    result = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _copy_sources(target: Path) -> None:
    target.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__")
            shutil.copytree(ROOT / name, target / name, ignore=ignore)
        else:
            shutil.copy2(ROOT / name, target / name)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built from a clean copy: an in-tree build would reuse a stale build/ folder."""
    top = tmp_path_factory.mktemp("wheel")
    _copy_sources(top / "src")
    options = ("-q", "--no-deps", "--no-build-isolation", "--no-index")
    _run(*PIP, "wheel", *options, "--wheel-dir", top, top / "src", cwd=top)
    (built,) = top.glob("bot-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path) -> Path:
    """A fresh virtualenv with the wheel installed (not editable) and the dev dependencies."""
    prefix = wheel.parent / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", prefix, cwd=wheel.parent)
    python = prefix / "bin" / "python"
    purelib = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site = Path(_run(python, "-c", purelib, cwd=prefix).strip())
    dev_sites = dict.fromkeys(sysconfig.get_path(key) for key in ("purelib", "platlib"))
    assert site.is_relative_to(prefix) and str(site) not in dev_sites
    (site / "dev-dependencies.pth").write_text("".join(f"{p}\n" for p in dev_sites))
    options = ("-q", "--no-deps", "--no-index")
    _run(*PIP, "--python", python, "install", *options, wheel, cwd=prefix)
    return prefix


def test_the_wheel_lists_every_module_prompt_and_template(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())

    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "bot").rglob("*.py")}
    assert modules <= names, sorted(modules - names)
    prompts = {f"bot/_prompts/{p.name}" for p in (ROOT / "prompts").glob("*.j2")}
    assert len(prompts) >= 8 and prompts <= names, sorted(prompts - names)
    templates = {f"bot/comments/templates/{p.name}" for p in (ROOT / TEMPLATES).glob("*.yaml")}
    assert len(templates) >= 2 and templates <= names, sorted(templates - names)
    assert "bot/py.typed" in names
    assert not any(name.startswith(("prompts/", "tests/")) for name in names)


def test_the_installed_wheel_renders_every_prompt_and_comment(venv: Path, tmp_path: Path) -> None:
    out = _run(venv / "bin" / "python", "-I", PROBE, cwd=tmp_path)
    report: dict[str, Any] = json.loads(out)

    assert report["prompts"] == 18  # system + user message for each of the 9 phases
    assert report["comments"]["en"] == report["comments"]["ja"] > 30
    assert report["editable"] == []
    assert str(ROOT) not in report["sys_path"] and "" not in report["sys_path"]
    site = venv.resolve()
    assert Path(report["prompt_dir"]).resolve().is_relative_to(site)
    needed = {"bot", "bot._prompts", "bot.llm.prompts", "bot.comments.render"}
    assert needed <= set(report["modules"])
    for name, file in report["modules"].items():
        assert Path(file).resolve().is_relative_to(site), f"{name} came from {file}"
    assert (venv / "bin" / "bot").is_file()  # the console script
