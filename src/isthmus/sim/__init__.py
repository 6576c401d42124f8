"""Simulation: simulated site backends and the experiment runner over a virtual clock."""
