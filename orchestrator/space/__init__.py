"""The candidate space of a campaign: pools read from files, checked, featurised, streamed and compacted.

Owns: ``pool`` (the in-memory pool), ``checks`` (row validation), ``csv_limits`` (the size of a cell and a row),
``features`` (descriptors and fingerprints), ``stream`` (chunked reading of large pools), ``compact`` (the compact
index for 10^6-row pools).
May import: vocabulary, simulators (for featurisation), ``orchestrator.spec``. Never the loop, policy or interfaces.
"""
