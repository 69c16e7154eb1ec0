"""Critic and policy training (torch, imported inside the functions that train); import its modules."""

__all__: list[str] = []  # the modules are the interface
