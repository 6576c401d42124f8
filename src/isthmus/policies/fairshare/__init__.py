"""Fair-share policies: how idle nodes are split among malleable jobs (grow and shrink).

One module a policy, each listed in `isthmus.policies.registry` under the family "fairshare"
and implementing `isthmus.policies.api.FairSharePolicy`. None is in the catalog yet.
"""
