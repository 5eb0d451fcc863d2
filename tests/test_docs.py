"""The documentation site: built with ``--strict`` (no broken link or anchor, no page left out
of the navigation), and every configuration key and every command documented once.

"Documented once" means one canonical place: a configuration key is one entry of the
generated configuration page (``scripts/docs_config_page.py`` reads ``config.yaml``) and no
hand-written page has a reference row of its own for it; a ``bot`` command and an issue
command are one row of a table whose first cell names them, across ``docs/`` (the commands
page). The README, the front door, repeats the issue commands: its table must list each one
once too, so it cannot drift either.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import types
from collections import Counter
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import BaseModel, SecretStr

from bot.cli import _parser
from bot.config import Settings
from bot.config.env import ENV_OVERRIDES, ENV_SECRETS, USER_CONFIG_ENV
from bot.events import CommandName

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
TIMEOUT = 120
_CODE = re.compile(r"`([^`]+)`")
_LINK = re.compile(r"\[[^\]]*\]\([^)]*\)")  # a name linked to its canonical place refers to it
_KEY_ID = re.compile(r'<code class="config-key" id="([^"]+)">')


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    argv = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)]
    return subprocess.run(
        argv, cwd=root, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    result = build(ROOT, target)
    assert result.returncode == 0, result.stdout + result.stderr
    return target


def test_the_site_builds_strict_with_its_index_and_configuration_pages(site: Path) -> None:
    for page in ("index.html", "configuration/index.html", "api-reference/index.html"):
        assert (site / page).is_file(), page
    api = (site / "api-reference" / "index.html").read_text()
    assert "/api/tasks/{task_id}/reject" in api  # rendered from the app's own description


def test_a_broken_link_or_a_page_out_of_the_navigation_fails_the_build(tmp_path: Path) -> None:
    root = tmp_path / "copy"
    for name in ("docs", "scripts"):
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("mkdocs.yml", "config.yaml"):
        shutil.copy2(ROOT / name, root / name)
    (root / "docs" / "orphan.md").write_text("# Nobody links here\n")
    with (root / "docs" / "commands.md").open("a") as page:
        page.write("\nSee [a key](configuration.md#no.such.key).\n")
    result = build(root, tmp_path / "site")
    assert result.returncode != 0
    assert "orphan.md" in result.stdout + result.stderr
    assert "#no.such.key" in result.stdout + result.stderr


def test_the_readme_is_a_front_door_whose_links_resolve() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [target for target in targets if "://" not in target]
    assert "docs/security.md" in local
    assert [target for target in local if not (ROOT / target).is_file()] == []


# --- what must be documented ------------------------------------------------------------------


def _model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _is_secret(annotation: Any) -> bool:
    return annotation is SecretStr or SecretStr in get_args(annotation)


def settings_keys(model: type[BaseModel] = Settings, prefix: str = "") -> set[str]:
    """Every key of the settings a file may set: leaves, and (below a section) the keys that
    group further keys. Secrets come only from the environment (docs/environment.md)."""
    keys: set[str] = set()
    for name, info in model.model_fields.items():
        if name == "source_path" or _is_secret(info.annotation):
            continue
        key = f"{prefix}{name}"
        nested = _model(info.annotation)
        if nested is None:
            keys.add(key)
            continue
        if prefix:
            keys.add(key)
        keys |= settings_keys(nested, f"{key}.")
    return keys


def cli_commands(parser: argparse.ArgumentParser, prefix: str = "") -> set[str]:
    """``serve``, ``tasks list``, ``config show``, ...: every command the parser takes."""
    found: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= cli_commands(sub, f"{prefix}{name} ")
    if found or not prefix:
        return found
    choices = [a.choices for a in parser._actions if a.choices and not a.option_strings]
    return {f"{prefix}{choice}" for choice in choices[0]} if choices else {prefix.strip()}


def _first_cells(text: str) -> list[str]:
    """The first cell of every table row of a Markdown page."""
    cells = []
    for line in text.splitlines():
        if line.startswith("|") and not re.match(r"^\|\s*-", line):
            cells.append(re.split(r"(?<!\\)\|", line)[1])
    return cells


def documented(pages: list[Path], start: str) -> Counter[str]:
    """How often each name is defined: a code span starting with ``start`` in a first cell
    made of code spans alone (not prose, and not inside a link: that refers to the
    definition), read up to its first argument (``[...]``, ``<...>``, an option or an
    upper-case name)."""
    counts: Counter[str] = Counter()
    for page in pages:
        for cell in _first_cells(page.read_text()):
            cell = _LINK.sub("", cell)
            if re.search(r"[A-Za-z]", re.sub(r"\b(and|or)\b", "", _CODE.sub("", cell))):
                continue  # prose that mentions a name, not a row that defines it
            for span in _CODE.findall(cell):
                if not span.startswith(start):
                    continue
                words = []
                for word in span[len(start) :].split():
                    if word[0] in "[<-" or word.isupper() or word in ("on", "off"):
                        break
                    words.append(word)
                counts[" ".join(words)] += 1
    return counts


def test_settings_keys_are_read_from_the_models() -> None:
    keys = settings_keys()
    assert {"server.host", "planning.reflection", "planning.reflection.depth"} <= keys
    assert {"mcp_servers", "llm.prices", "gitlab.webhook_secrets"} <= keys
    assert not {"llm.api_key", "server.api_token", "source_path", "planning"} & keys


def _hook(name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # as MkDocs loads a hook: dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_configuration_page_keeps_each_comment_with_its_key() -> None:
    text = (
        "# The header.\n\n"
        "# The section's own words.\n"
        "box:\n"
        "  size: 3        # how big, in <units>\n"
        "                 # and more words | here\n"
        "  # A note about what follows:\n"
        "  #   inner: {file: x}\n"
        "  inner: {}\n"
        "  nested:        # a group\n"
        '    url: "a#b"   # a # inside quotes is the value\n'
    )
    page = _hook("docs_config_page")
    assert page.config_keys(text) == ["box.size", "box.inner", "box.nested", "box.nested.url"]
    html = page.configuration_page(text)
    assert "<p>The section's own words.</p>" in html
    assert "how big, in &lt;units&gt; and more words | here</td>" in html
    assert "<p>A note about what follows:</p><pre><code>inner: {file: x}</code></pre>" in html
    assert '<code>"a#b"</code>' in html


def test_every_configuration_key_is_documented_once(site: Path) -> None:
    page = (site / "configuration" / "index.html").read_text()
    on_page = Counter(_KEY_ID.findall(page))
    assert set(on_page) == settings_keys()  # config.yaml names every setting, and no other
    assert [key for key, count in on_page.items() if count != 1] == []
    # The generated page is the reference: no hand-written page keeps a table of its own.
    pages = [*DOCS.glob("*.md"), ROOT / "README.md"]
    again = {key: n for key, n in documented(pages, "").items() if key in on_page}
    assert again == {}


def test_every_environment_variable_is_in_the_environment_page() -> None:
    """Secrets come only from the environment: their page is the environment's table."""
    cells = _first_cells((DOCS / "environment.md").read_text())
    listed = {span for cell in cells for span in _CODE.findall(cell)}
    read = {*ENV_OVERRIDES, *ENV_SECRETS, USER_CONFIG_ENV, "BOT_CONFIG", "LLM_API_KEY"}
    assert read - listed == set()


def test_every_bot_command_is_documented_once() -> None:
    commands = cli_commands(_parser())
    assert {"serve", "config show", "tasks list", "tasks stop", "pause-all", "action"} <= commands
    counts = documented(sorted(DOCS.glob("*.md")), "bot ")
    assert set(counts) == commands
    assert [name for name, count in counts.items() if count != 1] == []


def test_every_issue_command_is_documented_once() -> None:
    names = {name.value for name in CommandName if name is not CommandName.UNKNOWN}
    counts = documented(sorted(DOCS.glob("*.md")), "/agent ")
    assert set(counts) == names
    assert [name for name, count in counts.items() if count != 1] == []
    front_door = documented([ROOT / "README.md"], "/agent ")
    assert front_door == Counter(dict.fromkeys(names, 1))


def test_documented_counts_names_in_first_cells_only(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "| command | what |\n| --- | --- |\n"
        "| `/agent pause` / `/agent resume` | as `/agent stop` |\n"
        "| `bot tasks show ID` | `bot status` |\n"
        "| `bot serve [--role all\\|web]` | |\n"
        "| [`/agent stop`](commands.md) | a reference |\n"
        "| a task paused (`/agent status`) | prose |\n"
        "`/agent help` outside a table\n"
    )
    assert documented([page], "/agent ") == Counter({"pause": 1, "resume": 1})
    assert documented([page], "bot ") == Counter({"tasks show": 1, "serve": 1})
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    sub.add_parser("one")
    sub.add_parser("two").add_argument("verb", choices=["a", "b"])
    assert cli_commands(parser) == {"one", "two a", "two b"}
