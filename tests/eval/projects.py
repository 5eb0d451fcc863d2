"""Small real git repositories with a pytest suite, for scoring and mining tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bot.config import Settings

PYPROJECT = '[tool.pytest.ini_options]\npythonpath = ["."]\n'
# The test venv's interpreter (pytest in it) lies outside the checkout: the sandbox shows
# it read-only, and each task runs its tests with it.
EXPOSE = [str(Path(sys.base_prefix)), str(Path(sys.prefix))]
TEST_COMMAND = [sys.executable, "-m", "pytest"]


def git(repo: Path, *args: str, stdin: str | None = None, date: str = "") -> str:
    dates = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date} if date else {}
    env = {
        **dates,
        "GIT_AUTHOR_NAME": "Dev",
        "GIT_AUTHOR_EMAIL": "dev@example.com",
        "GIT_COMMITTER_NAME": "Dev",
        "GIT_COMMITTER_EMAIL": "dev@example.com",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(repo),
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(
        ["git", *args],
        cwd=repo,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def write(repo: Path, files: dict[str, str | None]) -> None:
    for rel, text in files.items():
        path = repo / rel
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def commit(repo: Path, files: dict[str, str | None], message: str, *, date: str = "") -> str:
    write(repo, files)
    git(repo, "add", "--all")
    git(repo, "commit", "-q", "--allow-empty", "-m", message, date=date)
    return git(repo, "rev-parse", "HEAD").strip()


def new_repo(path: Path, files: dict[str, str | None]) -> tuple[Path, str]:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    return path, commit(path, {"pyproject.toml": PYPROJECT, **files}, "initial")


def diff_of(repo: Path, files: dict[str, str | None]) -> str:
    """The diff that would make these changes; the working tree is left as it was."""
    write(repo, files)
    git(repo, "add", "--intent-to-add", "--all")
    text = git(repo, "diff", "--no-color", "HEAD")
    git(repo, "reset", "-q")
    git(repo, "checkout", "-q", "--", ".")
    git(repo, "clean", "-qfd")
    return text


def settings_for(tmp_path: Path, **sandbox: object) -> Settings:
    return Settings.model_validate(
        {
            "storage": {"data_dir": str(tmp_path / "data")},
            "sandbox": {"expose_paths": EXPOSE, "timeout": 120, **sandbox},
        }
    )
