"""A pattern guard for destructive commands: the second layer behind the sandbox.

Pure: ``refusal(argv)`` returns the reason a command is refused, or None. The
sandbox already keeps a command away from everything outside the workspace; this
guard catches the classics early with a message the agent can act on: recursive
deletion of ``/`` or a home directory, making file systems, ``dd`` onto devices,
fork bombs, and piping a download into a shell. Shell scripts passed as an argument
(``sh -c '...'``) are inspected too.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Sequence

_SEPARATORS = frozenset({";", "|", "||", "&", "&&", "(", ")", "{", "}", "\n"})
_PROTECTED = frozenset(
    {"/", "/*", "~", "~/*", "$HOME", "${HOME}", "$HOME/*", "${HOME}/*", ".*", "..", "../*"}
    | {f"/{d}" for d in ("bin", "boot", "dev", "etc", "home", "lib", "lib64", "opt", "proc")}
    | {f"/{d}" for d in ("root", "run", "sbin", "srv", "sys", "usr", "var")}
)
_FORK_BOMB = re.compile(r"(?P<f>[\w:.]+)\s*\(\)\s*\{[^}]*(?P=f)\s*\|\s*(?P=f)\s*&")
_PIPE_TO_SHELL = re.compile(
    r"\b(?:curl|wget|fetch)\b[^|;&\n]*\|\s*(?:sudo\s+)?(?:env\s+)?"
    r"(?:/usr)?(?:/bin/)?(?:ba|da|z|k|c|tc|fi)?sh\b"
)
_MKFS = re.compile(r"(?:^|[\s/;&|(])(?:mkfs(?:\.\w+)?|mke2fs|mkswap|wipefs)\b")
_DEVICE_WRITE = re.compile(
    r"(?:\bof=|>\s*)/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk|mapper/|md\d|dm-|loop)"
)


def refusal(argv: Sequence[str]) -> str | None:
    """Why ``argv`` is refused, or None when the guard lets it run."""
    texts = [" ".join(argv), *(arg for arg in argv if " " in arg or "\n" in arg)]
    for text in texts:
        reason = _text_refusal(text) or _token_refusal(_tokens(text))
        if reason:
            return f"refused: {reason}"
    return None


def _text_refusal(text: str) -> str | None:
    if _FORK_BOMB.search(text):
        return "this looks like a fork bomb"
    if _PIPE_TO_SHELL.search(text):
        return "piping a download into a shell is not allowed; download, read, then run"
    if _MKFS.search(text):
        return "making or wiping file systems is not allowed"
    if _DEVICE_WRITE.search(text):
        return "writing to a block device is not allowed"
    return None


def _tokens(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()")
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: fall back to whitespace
        return text.split()


def _commands(tokens: list[str]) -> list[list[str]]:
    commands: list[list[str]] = [[]]
    for token in tokens:
        if token in _SEPARATORS or set(token) <= set(";&|()"):
            commands.append([])
        else:
            commands[-1].append(token)
    return [c for c in commands if c]


def _token_refusal(tokens: list[str]) -> str | None:
    for words in _commands(tokens):
        while words and words[0] in ("sudo", "env", "command", "exec", "nice", "nohup"):
            words = words[1:]
        if not words:
            continue
        name = words[0].rsplit("/", 1)[-1]
        if name == "rm" and _dangerous_rm(words[1:]):
            return "recursive deletion of / , a system directory or a home directory"
        if name == "dd" and any(w.startswith("of=/dev/") and w != "of=/dev/null" for w in words):
            return "dd onto a device is not allowed"
    return None


def _dangerous_rm(args: list[str]) -> bool:
    flags = [a for a in args if a.startswith("-")]
    targets = [a for a in args if not a.startswith("-")]
    recursive = any(
        f in ("--recursive", "--no-preserve-root") or (not f.startswith("--") and "r" in f.lower())
        for f in flags
    )
    if "--no-preserve-root" in flags:
        return True
    return recursive and any(_normalised(t) in _PROTECTED for t in targets)


def _normalised(target: str) -> str:
    if target.startswith("/"):
        return posixpath.normpath(target).replace("//", "/")
    return target.rstrip("/") or target
