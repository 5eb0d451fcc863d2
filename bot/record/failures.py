"""Why work could not go on, in the words a person reads. Pure.

``DeliveryFailed`` carries the human-intervention reason of a refused push (git's own
words, cut and already redacted) and the recommendations; ``push_failure`` builds it
from the error of ``Workspace.commit_and_push``. ``SetupFailed`` (``setup_failed``) is
the same for a failing set-up command.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bot.text import clip

if TYPE_CHECKING:
    from bot.sandbox.setup import SetupResult

# --- a refused push ----------------------------------------------------------------------------

MAX_ERROR_CHARS = 600


@dataclass
class DeliveryFailed(Exception):
    """The work could not be delivered; a person has to step in."""

    reason: str
    hints: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return self.reason


def _lower_has(text: str, *words: str) -> bool:
    low = text.lower()
    return any(word in low for word in words)


def push_hints(error: str, *, branch: str) -> list[str]:
    """What to check, from what git (and the server behind it) said."""
    hints = []
    if _lower_has(error, "workflow"):
        hints.append(
            "The change touches CI workflow files (.github/workflows): the GitHub App "
            'needs the "workflows" permission (read and write) to push them, or leave '
            "workflow files out of the task"
        )
    if _lower_has(error, "non-fast-forward", "fetch first", "stale info"):
        hints.append(
            f"The branch {branch} changed on the remote while the task ran (the push was "
            "not a fast-forward): check who else pushes to it, then retry"
        )
    if _lower_has(error, "protected branch", "hook declined", "gh006", "pre-receive"):
        hints.append(
            f"A rule on the server (branch protection or a pre-receive hook) refused "
            f"the push to {branch}: check the rules that apply to it"
        )
    if not hints and _lower_has(error, "permission", "denied", "403", "authentication failed"):
        hints.append("Check that the bot's credentials may push to this repository")
    if not hints:
        hints.append(f"Check that the bot can push the branch {branch} to the repository")
    return hints


def push_failure(error: str, *, branch: str, kept_in: str = "") -> DeliveryFailed:
    """The intervention for a refused push; ``kept_in``: where the changed files are."""
    detail = clip(" ".join(error.split()), MAX_ERROR_CHARS, note=" …")
    hints = push_hints(error, branch=branch)
    if kept_in:
        hints.append(f"The changed files are kept in {kept_in}")
    return DeliveryFailed(f"the work could not be pushed to {branch}: {detail}", hints)


# --- set-up -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SetupFailed:
    """Set-up failed: why, what to check, and the failing command for the comment."""

    reason: str
    hints: list[str]
    details: dict[str, Any]


def setup_failed(result: SetupResult) -> SetupFailed:
    step = result.failure
    assert step is not None
    how = "timed out" if step.timed_out else f"exit code {step.exit_code}"
    reason = f"the set-up command `{step.command}` failed ({how}, {step.duration:.0f} s)"
    hints = [
        *result.hints,  # why set-up failed where it ran (the base branch's checkout, or offline)
        "Check that the project installs in a fresh clone, or name the set-up commands in "
        "`.agent.yaml` (`setup:`; `setup: []` turns set-up off)",
    ]
    failed = {"command": step.command, "exit_code": step.exit_code,
              "timed_out": step.timed_out, "tail": step.tail}  # fmt: skip
    return SetupFailed(reason, hints, {"setup": failed})
