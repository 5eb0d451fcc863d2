"""The failed checks as a person would look at them, for the agent's CI fix round. Pure.

Check names, conclusions, summaries, annotations and log tails come from outside (a
CI job prints what the code under test prints): every part is redacted
(``bot.redact``), fenced as untrusted data by the caller's ``fence`` (``bot.untrusted``'s,
passed in, so this room imports only the vocabulary), the check's name and conclusion
inside the fence with the rest (any app or person with access names its checks), and
the whole is bounded, fences and headings included: each failed check gets an even share
of ``max_chars``, and a log tail gives up its oldest lines first.
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
MAX_NAME_CHARS = 200
_MIN_SHARE = 600
_SEPARATOR = "\n\n"
SOURCE = "a failed CI check"


def ci_context(
    failed: Sequence[Check],
    *,
    annotations: Mapping[str, Sequence[Annotation]],
    logs: Mapping[str, LogTail],
    fence: Fence,
    known_secrets: Iterable[str] = (),
    max_chars: int = MAX_CHARS,
) -> str:
    """One section per failed check: a numbered heading, then, fenced, its name and
    conclusion, its summary, its annotations (at most ``MAX_ANNOTATIONS``) and its log's
    tail (``logs`` by ``Check.log_id``). At most ``max_chars`` characters in all, fences
    and headings included: each shown check gets an even share of them, at least
    ``_MIN_SHARE`` (so at most ``max_chars // _MIN_SHARE`` checks are shown, the others
    counted in a last line)."""
    if not failed:
        return ""
    secrets = tuple(known_secrets)
    shown = list(failed[: max(1, max_chars // _MIN_SHARE)])
    left = len(failed) - len(shown)
    last = f"{_SEPARATOR}(and {left} more failed checks, not shown)" if left else ""
    room = max_chars - len(last) - len(_SEPARATOR) * (len(shown) - 1)
    share = room // len(shown)
    sections = [
        _section(
            index, check, annotations.get(check.id, ()), logs.get(check.log_id), fence, secrets,
            share,
        )
        for index, check in enumerate(shown, 1)
    ]  # fmt: skip
    return _SEPARATOR.join(sections) + last


def _section(
    index: int,
    check: Check,
    notes: Sequence[Annotation],
    log: LogTail | None,
    fence: Fence,
    secrets: tuple[str, ...],
    share: int,
) -> str:
    """At most ``share`` characters: the check's name, conclusion and details come from
    outside (any app or person may name a check), so all of them are inside the fence."""
    heading = f"### Failed check {index}"
    name = _one_line(redact(check.name, known=secrets))[:MAX_NAME_CHARS]
    conclusion = _one_line(check.conclusion or check.state.value)[:40]
    title = f"Check: {name}\nConclusion: {conclusion}"
    inner = max(0, share - len(heading) - 1 - len(fence("", SOURCE)))  # the fenced text's
    room = max(0, inner - len(title) - len(_SEPARATOR))
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
    head = head[: room // 2] if len(head) > room // 2 else head
    if log is not None and log.text:
        label = "Log (its end):\n"
        text = _tail(redact(log.text, known=secrets), max(0, room - len(head) - len(label) - 2))
        cut = log.truncated or len(text) < len(log.text)
        head += ("\n\n" if head else "") + (label if cut else "Log:\n") + text
    body = head or "(the check reported no details)"
    return f"{heading}\n{fence(f'{title}{_SEPARATOR}{body}'[:inner], SOURCE)}"


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
