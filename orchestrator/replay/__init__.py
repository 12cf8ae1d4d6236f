"""What a ledger tells after the fact: what-if replay under another planner or rubric, and the campaign report
with its plots and reward tables. (Exact replay is the ledger's own fold; the trajectory fold the reward node uses
lives in ``loop``.)

May import: everything below it (vocabulary, plug-ins, card, ledger, space, policy, loop). Never scale or interfaces.
"""
