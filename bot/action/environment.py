"""What a GitHub Actions runner sets, read once, and the bot's settings built from it.

``bot action`` takes every setting from the environment, with the names the server
uses (``GITHUB_TOKEN`` or ``GITHUB_APP_ID`` + ``GITHUB_PRIVATE_KEY``, ``LLM_*``,
``BOT_CONFIG``, ``BOT_TRIGGER_LABEL``, ``BOT_COMMAND_PREFIX``, ``BOT_MAX_COST``) plus what
a runner sets (``GITHUB_REPOSITORY``, ``GITHUB_EVENT_NAME``, ``GITHUB_EVENT_PATH``,
``GITHUB_API_URL``, ``GITHUB_SERVER_URL``, ``GITHUB_RUN_ID``, ``GITHUB_RUN_ATTEMPT``,
``RUNNER_TEMP``, ``GITHUB_STEP_SUMMARY``, ``GITHUB_OUTPUT``): the same variables run it the
same way on a laptop or in a test. Nothing here reads ``os.environ`` itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bot.config import LLMSettings, Settings, load_settings

ROOT_NAME = "coding-agent"
DEFAULT_API_URL = "https://api.github.com"
DEFAULT_SERVER_URL = "https://github.com"
OPENAI_API = "https://api.openai.com/v1"
REQUIRED = ("GITHUB_REPOSITORY", "GITHUB_EVENT_NAME", "GITHUB_EVENT_PATH", "RUNNER_TEMP")


class ActionError(Exception):
    """Why this run cannot go on, in words for the step summary (and the issue)."""


@dataclass(frozen=True, slots=True)
class RunnerEnv:
    repository: str
    event_name: str
    event_path: Path
    temp: Path
    api_url: str = DEFAULT_API_URL
    server_url: str = DEFAULT_SERVER_URL
    run_id: str = ""
    run_attempt: str = "1"
    step_summary: Path | None = None
    output: Path | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> RunnerEnv:
        """The runner's variables; ``ActionError`` names any that is missing."""
        missing = [name for name in REQUIRED if not environ.get(name, "").strip()]
        if missing:
            raise ActionError(
                f"not set: {', '.join(missing)} (a GitHub Actions runner sets them; "
                "outside a runner, set them by hand)"
            )
        owner, _, name = environ["GITHUB_REPOSITORY"].strip().partition("/")
        if not owner or not name or "/" in name:
            raise ActionError(
                f"GITHUB_REPOSITORY is not owner/name: {environ['GITHUB_REPOSITORY']!r}"
            )

        def path(var: str) -> Path | None:
            value = environ.get(var, "").strip()
            return Path(value) if value else None

        return cls(
            repository=f"{owner}/{name}",
            event_name=environ["GITHUB_EVENT_NAME"].strip(),
            event_path=Path(environ["GITHUB_EVENT_PATH"].strip()),
            temp=Path(environ["RUNNER_TEMP"].strip()),
            api_url=(environ.get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/"),
            server_url=(environ.get("GITHUB_SERVER_URL") or DEFAULT_SERVER_URL).rstrip("/"),
            run_id=environ.get("GITHUB_RUN_ID", "").strip(),
            run_attempt=environ.get("GITHUB_RUN_ATTEMPT", "").strip() or "1",
            step_summary=path("GITHUB_STEP_SUMMARY"),
            output=path("GITHUB_OUTPUT"),
        )

    @property
    def root(self) -> Path:
        """Everything this run writes: the data directory, the state to keep, scratch."""
        return self.temp / ROOT_NAME

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def state_dir(self) -> Path:
        """What to keep for the next run (``action.yml`` uploads this folder)."""
        return self.root / "state"

    @property
    def incoming(self) -> Path:
        """Where the previous run's state is put before it is unpacked."""
        return self.root / "incoming"

    @property
    def run_key(self) -> str:
        """This run's name where a webhook delivery would have an id."""
        return f"action-{self.run_id or 'local'}-{self.run_attempt}"

    @property
    def run_url(self) -> str:
        if not self.run_id:
            return ""
        return f"{self.server_url}/{self.repository}/actions/runs/{self.run_id}"


def action_settings(environ: Mapping[str, str], runner: RunnerEnv) -> Settings:
    """The settings for this run: the server's variables, the data directory under
    ``RUNNER_TEMP`` (``BOT_DATA_DIR`` is not used: each run makes it afresh), and the file
    ``BOT_CONFIG`` names
    (relative to the working directory) or none at all (not a stray ./config.yaml).
    ``ConfigError`` says what is wrong."""
    env = dict(environ)
    env["BOT_DATA_DIR"] = str(runner.data_dir)  # made afresh by each run, from the kept state
    env.setdefault("GITHUB_API_URL", runner.api_url)
    path = env.get("BOT_CONFIG", "").strip()
    if not path:
        runner.root.mkdir(parents=True, exist_ok=True)
        empty = runner.root / "defaults.yaml"  # every key at its default
        empty.write_text("{}\n", encoding="utf-8")
        path = str(empty)
    settings = load_settings(env, path)
    return _hosted_model_by_default(settings, env)


def _hosted_model_by_default(settings: Settings, environ: Mapping[str, str]) -> Settings:
    """A runner has no local model: an OpenAI-compatible provider whose endpoint nobody
    chose (neither LLM_BASE_URL nor the configuration file) means OpenAI's API."""
    llm = settings.llm
    default = LLMSettings.model_fields["base_url"].default
    if llm.provider != "openai" or llm.base_url != default or environ.get("LLM_BASE_URL"):
        return settings
    return settings.model_copy(update={"llm": llm.model_copy(update={"base_url": OPENAI_API})})


def with_login(settings: Settings, login: str) -> Settings:
    """The settings with the bot's own GitHub login (the account its comments carry)."""
    bot = settings.bot.model_copy(update={"github_login": login})
    return settings.model_copy(update={"bot": bot})
