"""unarXive 2024 -> survey reading-list benchmark pipeline."""

__version__ = "0.1.0"
