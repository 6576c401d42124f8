"""The engine: owns the state, runs scheduling rounds, validates and applies decisions.

One engine serves both clocks: a simulated clock (event heap) and, for the live manager, a
wall clock. See `Engine`.
"""
