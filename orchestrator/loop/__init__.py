"""The campaign loop: a LangGraph StateGraph over the nodes propose -> validate -> screen -> approve -> dispatch ->
observe -> learn -> reward, with its checkpointer, lab clock, leases and resume.

Owns: ``graph`` (the StateGraph), ``state``, ``context`` (what a node reads), ``nodes/`` (one module per node),
``campaign`` (start, run, resume), ``aio`` (the async runner), ``screening``, ``beliefs``, ``ladder_view`` and
``rung_digest`` (the ladder as one iteration sees it), ``trajectory_fold`` (late lab results credited back onto
steps), ``history`` and ``importing`` (lab history in), ``human_answer`` (a human's answer and who gave it),
``jobs``, ``lab_clock``, ``lease``, ``llm_calls``, ``recorded_lab``, ``resume_policy``, ``summary``.
May import: everything below it (vocabulary, plug-ins, card, ledger, space, policy). Never replay, scale or
interfaces.
"""
