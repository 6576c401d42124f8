"""Policies: pure decisions over a read-only view of the engine's state.

A policy never reads a clock, never mutates the state and does no I/O (a test enforces it).
One folder per family, one module per policy; `registry` finds them by name.
"""
