"""rankscope's agent surface: ``analyze mcp``, a Model Context Protocol server over the store.

``agent.tools`` holds the questions as plain functions (store in, JSON data out), each a thin shell
over the library the CLI and the web app use (``analyzer.summary``, ``analyzer.analyses``, their
``analysis.*`` SQL tables under ``analyzer.store.query``'s lock-down, ``webapp.data`` and the
timeline's tiles); every answer carries its evidence rows (bounded) and, when a web app URL is
configured, deep links into it (``webapp.links``). ``agent.catalog`` holds the resources and
prompts, ``agent.server`` wires both into an MCP server of the official Python SDK (``mcp``,
the ``rankscope[mcp]`` extra).

Safe by construction: nothing here writes (the room may not import the ingest, the readers or the
fact writer: ``tests/test_import_directions.py``), no tool takes a path (the store is fixed when
the server starts), user SQL runs under the lock-down and limits of a shared server, every answer
is cut to a bounded number of rows and computed under a time limit, and names from traces travel
as JSON strings, never as markup.
"""
