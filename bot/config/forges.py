"""The ``github:`` and ``gitlab:`` sections: each forge's address and where its credentials
and webhook secrets come from (files or the environment, never ``config.yaml``; filled in
by ``bot.config.env``). Pure: nothing here reads files or the environment.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator


class _Section(BaseModel):
    # Errors never carry the input: by validation, secrets are merged into it.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


class GitHubSettings(_Section):
    api_url: str = "https://api.github.com"
    app_id: str | None = None
    private_key_path: Path | None = None
    webhook_secret_file: Path | None = None
    # Filled from the environment or the files above, never from config.yaml.
    private_key: SecretStr | None = None
    webhook_secret: SecretStr | None = None
    token: SecretStr | None = None

    @property
    def enabled(self) -> bool:
        has_auth = (self.app_id is not None and self.private_key is not None) or (
            self.token is not None
        )
        return has_auth and self.webhook_secret is not None


class WebhookSecretSource(_Section):
    """Where one project's or group's webhook secret comes from: a file or a variable."""

    file: Path | None = None
    env: str | None = Field(None, min_length=1)
    # Filled from ``file`` or ``env`` when the settings are loaded, never from config.yaml.
    secret: SecretStr | None = None

    @model_validator(mode="after")
    def _one_source(self) -> WebhookSecretSource:
        if (self.file is None) == (self.env is None):
            raise ValueError("give exactly one of file or env")
        return self


class GitLabSettings(_Section):
    url: str = "https://gitlab.com"
    token_file: Path | None = None
    webhook_secret_file: Path | None = None
    token: SecretStr | None = None
    webhook_secret: SecretStr | None = None
    # Project path or group path (a prefix of project paths) -> its own secret token.
    webhook_secrets: dict[str, WebhookSecretSource] = {}

    @property
    def enabled(self) -> bool:
        has_secret = self.webhook_secret is not None or bool(self.webhook_secrets)
        return self.token is not None and has_secret

    def scoped_webhook_secrets(self) -> dict[str, str]:
        """``webhook_secrets`` as path -> secret value (the entries whose secret is loaded)."""
        return {
            path: source.secret.get_secret_value()
            for path, source in self.webhook_secrets.items()
            if source.secret is not None
        }
