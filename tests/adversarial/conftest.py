"""The adversarial suite runs the real tools on a real clone, as tests/tools/ does."""

from tests.tools.conftest import make_workspace, remote

__all__ = ["make_workspace", "remote"]
