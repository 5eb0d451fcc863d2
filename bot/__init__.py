"""A webhook-driven planning agent for GitHub and GitLab."""

__version__ = "0.1.0"
