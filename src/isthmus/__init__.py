"""isthmus: join clusters and clouds into one pool of sites and allocate jobs to them by policy.

The same policies run live (a resource manager daemon) and simulated (a virtual clock over a
workload trace). See DESIGN in the project docs for the architecture.
"""

__version__ = "0.1.0"
