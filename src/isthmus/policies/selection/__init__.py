"""Site-selection and forwarding policies: which site or peer manager gets a job.

One module a policy, each listed in `isthmus.policies.registry` under the family "selection"
and implementing `isthmus.policies.api.SelectionPolicy`. None is in the catalog yet.
"""
