"""The REST API under ``/api``: tasks, their reports and artifacts, operator actions;
and the same operations as MCP tools at ``/mcp``.

Served only when ``server.api_token`` (``BOT_API_TOKEN``) is set; every request must
carry it as a bearer token (compared in constant time); a client that sent too many wrong
ones lately gets 429 (``bot.throttle``). Without the token configured ``create_app``
does not mount this at all, so ``/api`` answers 404. OpenAPI describes it at
``/api/openapi.json``, built from the same typed operations that serve it
(``operations.py``). Actions are the operator's (``bot.worker.operator``), recorded with
the token's name (``server.api_token_name``) as their author, and reach the task as the
issue's commands do.

``models.py`` the parameters and answers; ``routes.py`` the endpoints and their list;
``task_start.py`` a task started on an issue's address; ``config_file.py`` the
configuration file read, checked and replaced; ``operations.py`` serving an operation
(its parameters from the path, query, headers and body) and describing them all;
``mcp_tools.py`` the operations as MCP tools, ``mcp_server.py`` serving them at ``/mcp``
behind the same token.
"""
