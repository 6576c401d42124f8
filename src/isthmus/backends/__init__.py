"""Live site backends (local cluster of pilot slots, local cloud of pilot VMs)."""
