"""Fair-share policies: how idle processors are split among bags of tasks (grow and shrink).

One module a policy, each listed in `isthmus.policies.registry` under the family "fairshare"
and implementing `isthmus.policies.api.FairSharePolicy`: `gep` (Grid-EquiPartition) and `sep`
(Site-EquiPartition), KOALA-CS thesis §3.7.1; what they share is in `common.py`.
"""
