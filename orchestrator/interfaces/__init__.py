"""Where users meet closedloop: the typer command line split by command group (``cli``, ``cli_bench``,
``cli_rewards``, with ``cli_main`` the console script and ``cli_common`` their shared helpers), the MCP server, the
background runner, the live dashboard, and ``lab_counts`` (lab experiments apart from imported results, for all of
them).

May import: everything. Nothing of ours imports it (the console script ``closedloop`` is its entry point).
"""
