"""The pilot (worker agent) that runs on cluster nodes and cloud VMs."""
