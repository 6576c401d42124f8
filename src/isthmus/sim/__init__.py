"""Simulation: the experiment runner over a virtual clock (the simulated sites are isthmus.backends.simulated)."""
