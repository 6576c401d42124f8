"""Fair-share policies: how resources are split among jobs or users.

One module a policy, each listed in `isthmus.policies.registry` under the family "fairshare"
and implementing `isthmus.policies.api.FairSharePolicy`, whose `shares` says what it splits:
idle processors among bags of tasks (grow and shrink), `gep` (Grid-EquiPartition) and `sep`
(Site-EquiPartition), KOALA-CS thesis §3.7.1, what they share in `common.py`; or each cloud's
VMs among users, `vm_share` (Cloud Scheduler §3.3).
"""
