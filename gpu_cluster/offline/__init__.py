"""Offline tooling: the mock-engine render, the replacement rules and the render CLI (not part
of a deployed program)."""
