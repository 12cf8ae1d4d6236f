"""closedloop as an OpenEnv environment: this folder is OpenEnv's layout (``openenv.yaml``, ``pyproject.toml``,
``server/app.py``), and ``client.CampaignEnvClient`` is OpenEnv's client for it. The environment itself is
``orchestrator.environment.openenv_env``.
"""
