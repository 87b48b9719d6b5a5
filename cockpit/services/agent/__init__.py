"""Agents drive the cockpit, a person holds the gate: the MCP server (`server`), the tools it
exposes (`tools`) and the teardown requests and tool-call audit in the store (`requests`).

Imports only downward (models, config, transport, custody's verify/plan, queue, alerts,
store); never the teardown executor, the custody flow or Textual — a test walks the imports.
"""
