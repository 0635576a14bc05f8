"""polpo: a mission orchestrator daemon for teams of AI agents."""

__version__ = "0.1.0"
