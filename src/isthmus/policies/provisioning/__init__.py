"""Provisioning policies: when to lease and release cloud VMs."""
