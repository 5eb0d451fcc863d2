"""The bot as an MCP server at ``/mcp``: the tools of ``mcp_tools.py`` (the API's
operations) to MCP clients (editors, desktop assistants) over streamable HTTP, with the
MCP SDK's low-level server.

``McpEndpoint`` is the ASGI app the route serves: the API's bearer token first (the same
``Guard``, so the same throttle of wrong tokens), then the SDK's session manager, which
the app's lifespan runs (``running``). The manager is stateless and answers JSON: every
request stands alone, so any web replica can answer it and nothing is kept between
requests. A tool's arguments are validated into its operation's parameter model; an
operation's refusal (no such task, a task that cannot do that now) or invalid arguments
come back as a tool error with the reason, never as a crash.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from bot import __version__
from bot.api.mcp_tools import McpTool
from bot.api.operations import Guard, Refusal, problem

log = logging.getLogger(__name__)

NAME = "coding-agent-bot"
MAX_BODY_BYTES = 256 * 1024  # the largest arguments (a task's instructions) fit many times
INSTRUCTIONS = (
    "Operate the coding agent bot: list and read its tasks and their reports, start a task"
    " on an issue, approve or reject a plan, stop, pause and resume tasks, and pull or"
    " release the emergency stop (pause_all, resume_all)."
)


def tool_error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def describe_tool(tool: McpTool[Any]) -> types.Tool:
    """The tool as MCP lists it: the JSON schemas of its parameter and answer models."""
    schema = tool.params.model_json_schema()
    schema.pop("title", None)
    schema["additionalProperties"] = False
    output = tool.answer.model_json_schema() if tool.answer is not None else None
    annotations = types.ToolAnnotations(
        read_only_hint=tool.read_only,
        destructive_hint=tool.destructive if not tool.read_only else None,
        open_world_hint=False,
    )
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=schema,
        output_schema=output,
        annotations=annotations,
    )


def _invalid(exc: ValidationError) -> str:
    reasons = [
        f"{'.'.join(str(p) for p in error['loc']) or 'arguments'}: {error['msg']}"
        for error in exc.errors(include_url=False)
    ]
    return "invalid arguments: " + "; ".join(reasons)


def _result(tool: McpTool[Any], answer: BaseModel | Response) -> types.CallToolResult:
    """The operation's answer as a tool's result: the model as structured content (and
    its JSON as text), or the text of a Markdown answer."""
    if isinstance(answer, BaseModel):
        data = answer.model_dump(mode="json")
        text = json.dumps(data, ensure_ascii=False)
        content = [types.TextContent(type="text", text=text)]
        return types.CallToolResult(content=content, structured_content=data)
    body = getattr(answer, "body", None)
    if not isinstance(body, bytes):  # a streamed file: no tool answers one
        return tool_error(f"{tool.name}: the operation answered a file, not text")
    text = body.decode(answer.charset, errors="replace")
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


class BotMcpServer:
    """The MCP server's two handlers over the tools: list them, call one."""

    def __init__(self, tools: Iterable[McpTool[Any]]) -> None:
        self.tools = {tool.name: tool for tool in tools}
        self.listed = [describe_tool(tool) for tool in self.tools.values()]
        self.server: Server[Any] = Server(
            NAME,
            version=__version__,
            title="Coding agent bot",
            instructions=INSTRUCTIONS,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
        )

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(self.listed))

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = self.tools.get(params.name)
        if tool is None:
            known = ", ".join(self.tools)
            return tool_error(f"no tool {params.name[:100]!r}; the tools are: {known}")
        arguments = params.arguments or {}
        unknown = sorted(set(arguments) - set(tool.params.model_fields))
        if unknown:
            names = ", ".join(repr(name[:100]) for name in unknown[:10])
            return tool_error(f"invalid arguments: {tool.name} takes no {names}")
        try:
            given = tool.params.model_validate(arguments)
        except ValidationError as exc:
            return tool_error(_invalid(exc))
        try:
            answer = await tool.call(given)
        except Refusal as exc:
            return tool_error(f"{tool.name} refused ({exc.status}): {exc.detail}")
        except Exception:
            log.exception("MCP tool %s failed", tool.name)
            return tool_error(f"{tool.name} failed inside the bot; its log says why")
        return _result(tool, answer)


class McpEndpoint:
    """The ASGI app at ``/mcp``: the token, then the SDK's session manager (while the
    app's lifespan runs it: ``running``)."""

    def __init__(self, server: BotMcpServer, guard: Guard) -> None:
        self.server = server
        self.guard = guard
        self.manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """A session manager for the length of the app's lifespan (one per run: the
        SDK's manager cannot be started twice)."""
        manager = StreamableHTTPSessionManager(
            app=self.server.server,
            json_response=True,
            stateless=True,
            max_request_body_size=MAX_BODY_BYTES,
        )
        async with manager.run():
            self.manager = manager
            try:
                yield
            finally:
                self.manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = self.guard.refuse(Request(scope))
        if refused is None and self.manager is None:
            refused = problem(503, "the MCP server is not running (the app was not started)")
        if refused is not None:
            await refused(scope, receive, send)
            return
        assert self.manager is not None
        await self.manager.handle_request(scope, receive, send)
