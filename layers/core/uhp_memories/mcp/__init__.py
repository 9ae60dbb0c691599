"""The agent's seam over MCP (§9.1): POST /mcp, on the official `mcp` SDK (server.py), with the tools as
thin adapters over the services (tools.py) and recalled content fenced as data (fence.py, §13)."""
