"""Placeholder: this feature's commands are being written."""

COMMANDS: list = []
