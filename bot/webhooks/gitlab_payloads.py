"""The parts of GitLab's webhook payloads the bot reads, as msgspec structs.

Only these fields are decoded (and type-checked); everything else in a payload is
skipped (see ``bot.webhooks.decode``). A field typed ``X | None = None`` may be
missing or null; any other field is required.
"""

from __future__ import annotations

import msgspec

from bot.webhooks.decode import Part as _Part


class User(_Part):
    username: str
    id: int | None = None
    bot: bool | None = None


class Project(_Part):
    id: int
    path_with_namespace: str
    default_branch: str | None = None
    web_url: str | None = None


class Label(_Part):
    title: str


class Source(_Part):
    """A merge request's source project (a fork's, or the target's own)."""

    path_with_namespace: str | None = None


class CommitId(_Part):
    id: str


class Issuable(_Part):
    """An issue or merge request: ``object_attributes`` of its hook, or a note's noteable."""

    iid: int
    title: str | None = None
    description: str | None = None
    url: str | None = None
    state: str | None = None
    action: str | None = None
    labels: list[Label] | None = None
    source_branch: str | None = None
    source_project_id: int | None = None
    target_project_id: int | None = None
    source: Source | None = None
    target_branch: str | None = None
    last_commit: CommitId | None = None
    oldrev: str | None = None
    draft: bool | None = None
    work_in_progress: bool | None = None
    author_id: int | None = None


class LabelChange(_Part):
    previous: list[Label] | None = None
    current: list[Label] | None = None


class Changes(_Part):
    """What an ``update`` changed; only the labels matter to the bot."""

    labels: LabelChange | None = None


class IssuableEvent(_Part, kw_only=True):
    """``Issue Hook``, ``Confidential Issue Hook``, ``Merge Request Hook``."""

    object_attributes: Issuable
    user: User
    project: Project
    labels: list[Label] | None = None  # stands in when object_attributes has none
    changes: Changes | None = None


class Position(_Part):
    """Where a diff note sits: the new file's line, or the old one's for a removed line."""

    new_path: str | None = None
    new_line: int | None = None
    old_path: str | None = None
    old_line: int | None = None


class Note(_Part):
    """A note's ``object_attributes``. ``id`` and ``note`` are required only on the notes
    the bot handles (issues, merge requests), so they are checked after decoding."""

    noteable_type: str
    id: int | None = None
    note: str | None = None
    url: str | None = None
    action: str | None = None
    type: str | None = None
    system: bool | None = None
    discussion_id: str | None = None
    commit_id: str | None = None
    position: Position | None = None


class NoteEvent(_Part, kw_only=True):
    """``Note Hook``, ``Confidential Note Hook``. Who and where are required only on the
    notes the bot handles, like the noteable (``issue`` or ``merge_request``)."""

    object_attributes: Note
    user: User | None = None
    project: Project | None = None
    issue: Issuable | None = None
    merge_request: Issuable | None = None


# --- CI: pipelines and jobs ----------------------------------------------------------------


class PipelineAttributes(_Part):
    id: int
    sha: str
    status: str
    ref: str | None = None
    tag: bool | None = None
    source: str | None = None
    url: str | None = None


class PipelineJob(_Part):
    """One job (``builds`` entry) of a pipeline hook."""

    id: int
    name: str
    status: str
    stage: str | None = None
    allow_failure: bool | None = None
    manual: bool | None = None
    failure_reason: str | None = None


class MergeRequestBrief(_Part):
    iid: int
    source_branch: str | None = None


class HookUser(_Part):
    """The user of a pipeline or job hook; older job hooks name no ``username``."""

    username: str | None = None
    id: int | None = None
    bot: bool | None = None


class PipelineEvent(_Part, kw_only=True):
    """``Pipeline Hook``."""

    object_attributes: PipelineAttributes
    project: Project
    user: HookUser | None = None
    merge_request: MergeRequestBrief | None = None
    builds: list[PipelineJob] | None = None


class JobEvent(_Part, kw_only=True):
    """``Job Hook``: one job; it names its pipeline but no merge request."""

    build_id: int
    build_name: str
    build_status: str
    sha: str
    project: Project
    ref: str | None = None
    tag: bool | None = None
    pipeline_id: int | None = None
    build_stage: str | None = None
    build_allow_failure: bool | None = None
    build_failure_reason: str | None = None
    user: HookUser | None = None


class Action(_Part):
    action: object = None


class ProjectPath(_Part):
    path_with_namespace: str


class ProjectOnly(_Part):
    """What picks a delivery's webhook secret: the project, when the body names one."""

    project: ProjectPath | None = None


class Loose(_Part):
    """Any other event: its parts are kept raw, decoded afterwards when they can be."""

    user: msgspec.Raw = msgspec.Raw()
    project: msgspec.Raw = msgspec.Raw()
    object_attributes: msgspec.Raw = msgspec.Raw()
    user_username: object = None
    user_id: object = None
