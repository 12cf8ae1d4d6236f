"""The campaign loop: a LangGraph StateGraph over the nodes propose -> validate -> screen -> approve -> dispatch ->
observe -> learn -> reward, with its checkpointer, read model, lab frontend, leases and resume.

Owns: ``graph`` (the StateGraph; it refreshes the view before every node), ``state``, ``context`` (what a node
holds), ``view/`` (``CampaignView``: the ledger folded once per step into typed folds, the only way nodes read it),
``upcast`` (old event shapes, read in one place), ``lab`` (the driver's frontend: clock, handles, replay), ``nodes/``
(one module per node), ``campaign`` (start, run, resume), ``aio`` (the async runner), ``screening`` and ``compute``
(rungs through the result cache and the executor), ``beliefs``, ``ladder_view`` and ``rung_digest`` (the ladder as one
iteration sees it), ``trajectory_fold`` (late lab results credited back onto steps), ``step_scores``, ``history``
(the view for callers outside the graph) and ``importing`` (lab history in), ``human_answer`` (a human's answer and
who gave it), ``jobs``, ``lab_clock``, ``lease``, ``llm_calls``, ``recorded_lab``, ``resume_policy``, ``summary``.
May import: everything below it (vocabulary, plug-ins, card, ledger, space, policy). Never replay, scale or
interfaces.
"""
