"""The decision core: what to measure next.

Owns: ``planners/`` (bo, bo-sf, cheap-first, botorch, random, llm; the surrogate, acquisition and ladder prior),
``generation/`` (new structures for open spaces), ``escalation`` (the value-of-information rule of the ladder),
``success_bar``, ``planner_stats`` and ``proposal_checks``.
May import: vocabulary, plug-ins, the card (``spec``, ``seeding``, ``planner_registry``), ``ledger`` and ``space``.
Never the loop, replay or interfaces: the loop calls the policy, not the other way round (the screen, which runs
the ladder inside a loop iteration, is ``loop.screening``).
"""
