"""Chaos scenario 7's strategies and targets (hypothesis): hostile input.

Every input is either accepted correctly or rejected with a typed error (a
`QueueguardError`, or exit 1/2 from the CLI), and a rejection writes nothing.
`bench/chaos/hostile_input.py` runs every target at full scale; `tests/test_reliability_fuzz.py`
runs them at CI scale, plus regressions of what they found.
"""
