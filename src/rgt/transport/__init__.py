"""Transports: how rgt runs a command on a machine and moves files to and from it."""

from rgt.transport.base import CommandResult, Transport

__all__ = ["CommandResult", "Transport"]
