"""Site-selection and forwarding policies: which peer manager gets a new job.

One module a policy, each listed in `isthmus.policies.registry` under the family "selection"
and implementing `isthmus.policies.api.SelectionPolicy`: Villegas's LocalFirst (§4.3.2),
RoundRobin, LowestQlen, LowestQlenCpus, HighestIdle, LowestLoad (§4.5.2), HighestCap, BFCap and
BFIdle (§7.3.2), and the IBM meta-scheduler's four-stage matching with its filter plug-ins.
They decide on the jobs not routed yet (`View.unrouted`) and return `ForwardJob` decisions; a
job they do not forward stays with this manager's allocation policy.
"""
