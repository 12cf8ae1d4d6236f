"""closedloop's public face for users of its environments. Nothing else in the project imports it.

``import closedloop.envs`` registers the gymnasium environment ``closedloop/Campaign-v0``.
"""

__all__: list[str] = []
