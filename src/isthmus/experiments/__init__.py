"""Experiments that regenerate a seed's evaluation: sweeps of simulations, tables, figures, Markdown."""
