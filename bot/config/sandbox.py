"""The ``sandbox:`` and ``workspace:`` sections: the bounds of the machine the agent's
tools run in (time, memory, processes, disk, network and the egress allow-list) and the
workspace's branch and change request settings. Pure: nothing here reads files or the
environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class _Section(BaseModel):
    # Errors never carry the input: by validation, secrets are merged into it.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


class SandboxSettings(_Section):
    allow_unsandboxed_DANGEROUS: bool = False
    network: bool = False
    timeout: int = Field(300, ge=1)
    setup_timeout: int = Field(900, ge=1)  # the whole set-up of a fresh clone
    cpu_seconds: int = Field(600, ge=1)
    memory_mb: int = Field(2048, ge=64)
    max_processes: int = Field(256, ge=8)
    max_file_mb: int = Field(100, ge=1)
    tmp_mb: int = Field(512, ge=8)
    shm_mb: int = Field(64, ge=1)  # /dev/shm (a tmpfs: memory); the rest of /dev is read-only
    workspace_mb: int = Field(4096, ge=16)
    workspace_files: int = Field(200_000, ge=100)  # files and folders, .git included
    # The most one command may write into the workspace: held in memory (a tmpfs under
    # an overlay) until the command ends, then written to disk.
    write_mb: int = Field(1024, ge=1)
    max_output_chars: int = Field(20_000, ge=1000)
    expose_paths: tuple[Path, ...] = ()
    # hosts a command with network may reach besides the package indexes the host's pip
    # and npm configuration names: host, host:port, *.domain, or * (any public host)
    egress_allow: tuple[
        Annotated[str, Field(pattern=r"^(\*|(\*\.)?[A-Za-z0-9][A-Za-z0-9.-]*)(:[0-9]{1,5})?$")], ...
    ] = ()


class WorkspaceSettings(_Section):
    branch_prefix: str = "agent/"
    max_file_bytes: int = Field(10 * 1024 * 1024, ge=1024)
    draft_change_requests: bool = True
    ready_when_green: bool = False  # mark the draft ready when the gate and every check passed
    lfs: bool = False  # fetch and push LFS content (the forge's own LFS endpoint only)
