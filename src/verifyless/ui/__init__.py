"""The read-only dashboard (``verifyless ui``): see ``verifyless.ui.app``."""
