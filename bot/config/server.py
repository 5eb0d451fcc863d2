"""The ``server:``, ``storage:`` and ``worker:`` sections: the web server and its bounds,
the API token, where the bot keeps its data, and the worker's slots, leases and watchdog.
Pure: nothing here reads files or the environment.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator


class _Section(BaseModel):
    # Errors never carry the input: by validation, secrets are merged into it.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


MIN_API_TOKEN_CHARS = 32  # a guessed token must be out of reach even without throttling


class ServerSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=1, le=65535)
    max_body_bytes: int = Field(25 * 1024 * 1024, ge=1024)
    # Webhook bodies being read at once reserve their Content-Length (max_body_bytes when
    # they declare none) from this budget; a request that does not fit gets 503 at once.
    max_body_bytes_in_flight: int = Field(64 * 1024 * 1024, ge=1024)
    # Seconds a client has to send its whole body; a slower one gets 408.
    body_timeout: float = Field(10.0, gt=0, le=3600)
    public_url: str = ""
    # The REST API under /api (and the dashboard) answer only with this bearer token
    # (BOT_API_TOKEN); without it /api answers 404. Actions taken with it are recorded
    # as api_token_name's.
    api_token: SecretStr | None = None
    api_token_name: str = Field("api", min_length=1, max_length=64, pattern=r"^[\w .@-]+$")
    # Seconds a client has, from connecting (or from its last answer on a kept-alive
    # connection), to send a request's line and headers; a slower one is closed.
    header_timeout: float = Field(10.0, gt=0, le=300)
    # Seconds an idle kept-alive connection stays open between requests.
    keep_alive_timeout: int = Field(5, ge=1, le=300)
    # Connections open at once (and requests in hand); beyond it a connection gets 503
    # and is closed. Lowered at start to fit the process's open-file limit.
    limit_concurrency: int = Field(1000, ge=16, le=1_000_000)
    # The reverse proxies (addresses or networks) whose X-Forwarded-For and
    # X-Forwarded-Proto are believed; empty: nobody's (the peer is the client).
    forwarded_allow_ips: tuple[str, ...] = ()
    # Failed logins and wrong bearer tokens one client may send within
    # auth_failure_window seconds; beyond them it gets 429 with Retry-After.
    auth_max_failures: int = Field(10, ge=1, le=10_000)
    auth_failure_window: float = Field(300.0, gt=0, le=86_400)

    @field_validator("forwarded_allow_ips")
    @classmethod
    def _addresses(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise ValueError(
                    f"{item!r} is not an IP address or network (e.g. 10.0.0.5, 10.0.0.0/8)"
                ) from None
        return value

    def api_token_problem(self) -> str | None:
        """Why ``api_token`` may not serve the API and dashboard (None: it may, or unset)."""
        if self.api_token is None:
            return None
        length = len(self.api_token.get_secret_value())
        if 0 < length < MIN_API_TOKEN_CHARS:
            return (
                f"BOT_API_TOKEN (server.api_token) is {length} characters long; it must have "
                f"at least {MIN_API_TOKEN_CHARS} (make one with: python3 -c "
                "'import secrets; print(secrets.token_urlsafe(32))')"
            )
        return None

    @model_validator(mode="after")
    def _one_body_fits_the_budget(self) -> ServerSettings:
        if self.max_body_bytes_in_flight < self.max_body_bytes:
            raise ValueError(
                f"server.max_body_bytes_in_flight ({self.max_body_bytes_in_flight}) must be "
                f"at least server.max_body_bytes ({self.max_body_bytes})"
            )
        return self


class StorageSettings(_Section):
    backend: Literal["sqlite", "postgres"] = "sqlite"
    data_dir: Path = Path(".data")
    postgres_dsn: SecretStr | None = None
    # The most one task's run directory (data_dir/runs/<task>) may hold: command and
    # set-up logs and artifacts stop there (the record of the run is always written).
    run_dir_mb: int = Field(256, ge=1)
    # Run directories of tasks that ended this many days ago are deleted (0: never).
    runs_retention_days: float = Field(30.0, ge=0)


class WorkerSettings(_Section):
    max_workers: int = Field(2, ge=1, le=64)
    lease_seconds: int = Field(60, ge=5, le=3600)
    poll_interval: float = Field(0.5, gt=0, le=60)
    # A run that makes no progress (no store, forge, model or tool call starts or ends)
    # for this long is stuck: the watchdog logs what it awaits and retries it.
    stall_seconds: int = Field(1200, ge=1, le=86400)
    # GitHub App mode: on start, how far back to look for webhook deliveries that failed
    # while the bot was down, to ask GitHub for them again (0: never). GitHub keeps
    # deliveries for three days.
    redeliver_hours: float = Field(24.0, ge=0, le=72)
