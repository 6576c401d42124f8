"""Prediction policies: runtime and wait-time estimates used by SJF and HSDF."""
