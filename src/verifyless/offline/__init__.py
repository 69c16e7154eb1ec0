"""Offline replays: critic and screener benchmarks, simulated critics, pool worlds, break-even, prompt tuning."""

__all__: list[str] = []  # the modules are the interface
