"""Agents drive rgt, humans release machines.

``server`` (``rgt mcp``) exposes the verbs as MCP tools (standard library only); ``skill``
ships SKILL.md, the instructions a coding agent reads, and installs it where each host looks.
Importing this package imports neither the CLI nor anything outside the standard library.
"""
