"""The runtime's pure core: queue keys, ack arithmetic, the store contract, History types.

No I/O and no dependency on any other queueguard package except `errors`.
"""
