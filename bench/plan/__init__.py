"""The `plan` benchmark (docs/benchmarks.md, "plan: estimate vs real duration").

`python -m bench.plan.estimate` (`estimate`) builds a target database with a 1 M-row table
carrying many indexes, prices one statement per case with `queueguard plan` (on two sample
sizes), runs the same statement for real on a fresh copy of the target, and compares.
"""
