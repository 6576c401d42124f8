"""Every implementation of a site backend, the one home of "how isthmus talks to a site".

The engine's port is `isthmus.engine.backend` (`SiteBackend`, `CloudBackend`, `Vm`): the
interface the engine drives. Its implementations all live here:

- simulated sites: `simulated` (`SimCluster`, `SimCloud`, on the simulated clock);
- live sites on this machine: `local` (`LocalCluster`, `LocalCloud`: pilots the manager starts);
- live sites behind an external system, the engine-side adapters: `batch_site` (`BatchCluster`:
  a run is a batch job), `pilot_jobs_site` (`PilotJobs`: pilot jobs hold the nodes) and
  `cloud_site` (`ProviderCloud`: VMs leased from a provider). They take a `host.SiteHost`
  (what they use of the live manager), never the manager itself;
- the drivers those adapters drive, behind two protocols (`api.BatchSystem`,
  `api.CloudProvider`, typed `errors`): `slurm`, `gridengine`, `libcloud_provider`, and `fake`
  (a fake batch system and cloud for tests); `registry` finds a driver by name (entry points
  for outside packages), `runner` runs their commands locally or over one kept SSH connection;
- what the live adapters share: `external` (a site's worker thread), `node` (a pilot position)
  and `jobfiles` (where a run's outputs go; batch scripts and their directives).
"""
