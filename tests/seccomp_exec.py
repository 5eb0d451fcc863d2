"""Run a command under a seccomp profile of the JSON form container runtimes read, as a
runtime would: as another user, with no_new_privs, the filter loaded just before exec.

    python tests/seccomp_exec.py PROFILE.json UID -- COMMAND ...

The filter is built by libseccomp (the library runc and crun use), through ctypes. It
reads the keys the profile uses: defaultAction, defaultErrnoRet, architectures and
syscalls (names, action, errnoRet, args with index, value, valueTwo, op; the args of
one entry must all hold). A name this kernel's architecture does not know is skipped,
as the runtimes do. Exit 120: the filter could not be built.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import sys
from typing import Any

ACTIONS = {"SCMP_ACT_ALLOW": 0x7FFF0000, "SCMP_ACT_KILL_PROCESS": 0x80000000}
ERRNO = 0x00050000
COMPARE = {"SCMP_CMP_NE": 1, "SCMP_CMP_LT": 2, "SCMP_CMP_LE": 3, "SCMP_CMP_EQ": 4,
           "SCMP_CMP_GE": 5, "SCMP_CMP_GT": 6, "SCMP_CMP_MASKED_EQ": 7}  # fmt: skip
ARCHES = {"SCMP_ARCH_X86_64": b"x86_64", "SCMP_ARCH_X86": b"x86", "SCMP_ARCH_X32": b"x32",
          "SCMP_ARCH_AARCH64": b"aarch64", "SCMP_ARCH_ARM": b"arm"}  # fmt: skip
EEXIST = 17


class ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


def _action(name: str, errno: int | None) -> int:
    if name == "SCMP_ACT_ERRNO":
        return ERRNO | ((errno if errno is not None else 1) & 0xFFFF)
    return ACTIONS[name]


def load(profile: dict[str, Any]) -> None:
    lib = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_arch_resolve_name.restype = ctypes.c_uint32
    lib.seccomp_arch_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(ArgCmp)
    ]  # fmt: skip
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(_action(profile["defaultAction"], profile.get("defaultErrnoRet")))
    if not ctx:
        raise OSError("seccomp_init failed")
    for arch in profile.get("architectures", []):
        rc = lib.seccomp_arch_add(ctx, lib.seccomp_arch_resolve_name(ARCHES[arch]))
        if rc not in (0, -EEXIST):
            raise OSError(f"seccomp_arch_add({arch}): {rc}")
    for rule in profile["syscalls"]:
        action = _action(rule["action"], rule.get("errnoRet"))
        args = rule.get("args") or []
        array = (ArgCmp * max(1, len(args)))(
            *[ArgCmp(a["index"], COMPARE[a["op"]], a["value"], a.get("valueTwo", 0)) for a in args]
        )
        for name in rule["names"]:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:
                continue  # not a system call of this architecture
            rc = lib.seccomp_rule_add_array(ctx, action, number, len(args), array)
            if rc != 0:
                raise OSError(f"seccomp_rule_add({name}): {rc}")
    rc = lib.seccomp_load(ctx)
    if rc != 0:
        raise OSError(f"seccomp_load: {rc}")


def main(argv: list[str]) -> None:
    path, uid, dash, *command = argv
    assert dash == "--" and command, __doc__
    profile = json.loads(open(path, encoding="utf-8").read())  # noqa: SIM115 (a one-shot read)
    if int(uid) != os.getuid():
        os.setgroups([])
        os.setgid(int(uid))
        os.setuid(int(uid))
    try:
        load(profile)
    except OSError as exc:
        print(f"seccomp_exec: {exc}", file=sys.stderr)
        raise SystemExit(120) from None
    os.execvp(command[0], command)  # noqa: S606 (the command under test, as given)


if __name__ == "__main__":
    main(sys.argv[1:])
