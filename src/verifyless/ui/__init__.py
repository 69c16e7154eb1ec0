"""The read-only dashboard (``verifyless ui``): see ``verifyless.ui.app``."""

__all__: list[str] = []  # the modules are the interface
