"""Agents drive rgt, humans release machines.

``server`` (``rgt mcp``) exposes the verbs as MCP tools and needs the ``mcp`` extra; ``skill``
ships SKILL.md, the instructions a coding agent reads, and installs it where each host looks.
Importing this package imports neither the MCP SDK nor the CLI.
"""
