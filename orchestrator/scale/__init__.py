"""Running many campaigns or many workers at once: ``workers`` (several processes on one PostgreSQL ledger,
with leases) and ``fanout`` (campaigns across processes or a Ray cluster).

May import: everything below it (vocabulary, plug-ins, spec, space, policy, ledger, loop). Never interfaces.
"""
