"""The API's routes, one module a resource, each an `APIRouter` built by a function that
receives what its routes use (the manager, the peer federation, `isthmus.server.auth.Auth`):
jobs, bags, sites (and queues, VMs), budgets, accounting (and forecast), admin (tokens, users,
events, stop), pilots and peers; `common` holds the error documents and checks they share.
`isthmus.server.app` assembles them."""
