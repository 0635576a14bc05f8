"""Expectation types as registered checks: one module per type; see :mod:`polpo.checks.registry`."""
