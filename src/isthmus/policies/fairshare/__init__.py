"""Fair-share policies: how resources are split among jobs or users.

One module a policy, each listed in `isthmus.policies.registry` under the family "fairshare"
and implementing `isthmus.policies.api.FairSharePolicy`: `vm_share` (each cloud's VMs split
evenly among users, Cloud Scheduler §3.3).
"""
