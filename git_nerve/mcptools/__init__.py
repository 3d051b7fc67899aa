"""`git nerve mcp`: an MCP server for the task of a worktree (server.py, on the official `mcp` SDK),
the tools as plain functions (tools.py), and its registration with agent CLIs (install.py)."""
