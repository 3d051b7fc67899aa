"""git-nerve: git-native coordination for many AI coding agents on one repository."""

__version__ = "0.1.0"
