"""The workspace's bound, held by the kernel: pure parts (the wrapper and its bounds).

A bind mount has no size of its own, and a check from outside comes too late: 20 x
``fallocate -l 99M`` put 1,980 MB on disk between two checks a second apart, under
``workspace_mb=64``. So a sandboxed command does not write to the workspace itself: it
writes into an overlay whose upper layer is a tmpfs with ``size=`` and ``nr_inodes=``,
the room left under ``sandbox.workspace_mb`` and ``sandbox.workspace_files`` (at most
``sandbox.write_mb``), over the workspace shown read-only. A write past the room fails
at once with "No space left on device". When the command has ended, the bot applies the
layer to the workspace on disk (``upper_sync``), which therefore persists as before,
between commands and across restarts, for the bot's own git to clone, commit and push.

Only a tmpfs and an overlay can be mounted in a user namespace, so this holds for a bot
that is not root as well (Linux 5.11+ for an overlay in a user namespace, 6.6+ for the
extended attributes it keeps on a tmpfs). The steps (``WRAPPER``), run by ``sh`` as
the sandbox's first process, with the capabilities bwrap gave it for this alone:

1. mount the tmpfs and, over the workspace, the overlay (``userxattr``: the form a user
   namespace may mount), and bind ``.git`` read-only on top;
2. say "ready" on one pipe and wait for the bot's answer on another: meanwhile the bot
   opens the upper layer through ``/proc/<pid>/root``, and the open descriptor keeps
   the layer alive after the sandbox is gone;
3. unmount the tmpfs from where the command could reach it (the overlay keeps using
   it), enter the working directory through the overlay (the pipes stay open, as
   ``sh`` handles only descriptors 0-9, but the bot has closed its ends: they lead
   nowhere);
4. run the command in a nested user namespace that maps the bot's own user back (for a
   bot that is root: root), with no capability and ``no_new_privs``.

The tmpfs is memory until the command ends: ``sandbox.write_mb`` bounds it. A folder
costs a block on disk and nothing on a tmpfs, so 4 KiB of the byte room is kept back
for every file the command may create: the workspace stays within both bounds on disk.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bot.sandbox.bwrap import WRITES_DIR
from bot.sandbox.disk import Usage

__all__ = ["WRAPPER", "Helpers", "WriteRoom", "wrapper_argv", "write_room"]

BLOCK = 4096  # what a folder costs on disk (ext4, xfs), kept back per possible file
# Inodes of the layer's own making: the tmpfs root, upper/, work/ and overlay's work/work.
_OWN_INODES = 4
# The least room a command gets while the workspace is within its bounds, so that one
# that deletes files (whiteouts take inodes) still runs when the workspace is nearly full.
MIN_BYTES = 64 * 1024
MIN_FILES = 64

WRAPPER = r"""set -eu
root=$1 cwd=$2 size=$3 inodes=$4 ready=$5 ack=$6 uid=$7 gid=$8 mount=$9
shift 9
umount=$1 unshare=$2 setpriv=$3 writes=$4
shift 4
case "$ready$ack" in *[!0-9]*) exit 125 ;; esac
"$mount" -t tmpfs -o "size=$size,nr_inodes=$inodes,mode=0700" bot-writes "$writes"
mkdir "$writes/upper" "$writes/work"
cd "$root"
layers="lowerdir=.,upperdir=$writes/upper,workdir=$writes/work"
"$mount" -t overlay -o "$layers,userxattr,redirect_dir=nofollow,metacopy=off,index=off" \
  bot-workspace "$root"
if [ -d "$root/.git" ]; then "$mount" --bind -o ro "$root/.git" "$root/.git"; fi
echo ready > "/proc/self/fd/$ready"
read -r _ < "/proc/self/fd/$ack"
"$umount" -l "$writes"
cd "$cwd"
exec "$unshare" --user --map-user="$uid" --map-group="$gid" -- \
  "$setpriv" --no-new-privs --inh-caps=-all --ambient-caps=-all --bounding-set=-all -- "$@"
"""


@dataclass(frozen=True, slots=True)
class WriteRoom:
    """The upper layer's tmpfs: ``size=`` bytes and ``nr_inodes=`` inodes."""

    bytes: int
    inodes: int


def write_room(used: Usage, *, max_bytes: int, max_files: int, write_bytes: int) -> WriteRoom:
    """What one command may write, given what the workspace holds: the room left under
    both bounds (at least the small minimum), 4 KiB of bytes kept back per file, and at
    most ``write_bytes``. The caller refuses a workspace already over a bound."""
    room_bytes = max(max_bytes - used.bytes, MIN_BYTES)
    room_files = max(max_files - used.files, MIN_FILES)
    files = max(min(room_files, room_bytes // (2 * BLOCK)), 1)
    size = min(room_bytes - files * BLOCK, write_bytes)
    return WriteRoom(bytes=max(size, BLOCK), inodes=files + _OWN_INODES)


@dataclass(frozen=True, slots=True)
class Helpers:
    """The host's programs the wrapper runs (util-linux and mount, found on the host)."""

    mount: str
    umount: str
    unshare: str
    setpriv: str


def wrapper_argv(
    helpers: Helpers,
    room: WriteRoom,
    *,
    root: Path,
    cwd: Path,
    ready_fd: int,
    ack_fd: int,
    uid: int,
    gid: int,
) -> list[str]:
    """``sh`` running ``WRAPPER``; the command follows it."""
    return [
        "/bin/sh", "-c", WRAPPER, "bot-overlay",
        str(root), str(cwd), str(room.bytes), str(room.inodes),
        str(ready_fd), str(ack_fd), str(uid), str(gid),
        helpers.mount, helpers.umount, helpers.unshare, helpers.setpriv, WRITES_DIR,
    ]  # fmt: skip
