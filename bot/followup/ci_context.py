"""The failed checks as a person would look at them, for the agent's CI fix round. Pure.

Check names, conclusions, summaries, annotations and log tails come from outside (a
CI job prints what the code under test prints): every part is redacted
(``bot.redact``), fenced as untrusted data by the caller's ``fence`` (``bot.untrusted``'s,
passed in, so this room imports only the vocabulary), and the whole is
bounded: each failed check gets an even share of ``max_chars``, and a log tail gives up
its oldest lines first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from bot.change_state import Annotation, LogTail
from bot.events import Check
from bot.redact import redact

# (text, where it came from) -> the text fenced as untrusted data
# (``bot.untrusted.fence``).
Fence = Callable[[str, str], str]

MAX_CHARS = 24_000
MAX_ANNOTATIONS = 20
_MIN_SHARE = 600


def ci_context(
    failed: Sequence[Check],
    *,
    annotations: Mapping[str, Sequence[Annotation]],
    logs: Mapping[str, LogTail],
    fence: Fence,
    known_secrets: Iterable[str] = (),
    max_chars: int = MAX_CHARS,
) -> str:
    """One section per failed check: its name and conclusion, then its summary, its
    annotations (at most ``MAX_ANNOTATIONS``) and its log's tail (``logs`` by
    ``Check.log_id``), fenced. At most ``max_chars`` characters in all, give or take the
    fences' own lines."""
    if not failed:
        return ""
    secrets = tuple(known_secrets)
    share = max(_MIN_SHARE, max_chars // len(failed))
    sections = [
        _section(
            check, annotations.get(check.id, ()), logs.get(check.log_id), fence, secrets, share
        )
        for check in failed
    ]
    return "\n\n".join(sections)


def _section(
    check: Check,
    notes: Sequence[Annotation],
    log: LogTail | None,
    fence: Fence,
    secrets: tuple[str, ...],
    share: int,
) -> str:
    name = _one_line(redact(check.name, known=secrets))[:200]
    heading = f"### {name}: {check.conclusion or check.state.value}"
    parts = []
    if check.summary:
        parts.append("Summary:\n" + check.summary.strip())
    if notes:
        parts.append(
            "Annotations:\n" + "\n".join(_annotation(note) for note in notes[:MAX_ANNOTATIONS])
        )
        if len(notes) > MAX_ANNOTATIONS:
            parts.append(f"(and {len(notes) - MAX_ANNOTATIONS} more annotations)")
    head = redact("\n\n".join(parts), known=secrets)
    head = head[: share // 2] if len(head) > share // 2 else head
    room = max(0, share - len(head))
    if log is not None and log.text:
        text = _tail(redact(log.text, known=secrets), room)
        cut = log.truncated or len(text) < len(log.text)
        head += ("\n\n" if head else "") + ("Log (its end):\n" if cut else "Log:\n") + text
    body = head or "(the check reported no details)"
    return f"{heading}\n{fence(body, f'CI check {name}')}"


def _annotation(note: Annotation) -> str:
    lines = (
        f"{note.start_line}"
        if note.start_line == note.end_line
        else (f"{note.start_line}-{note.end_line}")
    )
    title = f" {note.title}:" if note.title else ""
    return f"- {note.path}:{lines} [{note.level}]{title} {_one_line(note.message)}"


def _tail(text: str, room: int) -> str:
    """The last ``room`` characters, from a line start when it had to cut."""
    if len(text) <= room:
        return text
    kept = text[len(text) - room :]
    newline = kept.find("\n")
    return kept[newline + 1 :] if 0 <= newline < len(kept) - 1 else kept


def _one_line(text: str) -> str:
    return " ".join(text.split())
