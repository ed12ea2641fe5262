"""Scale-out on Citus: what a cluster is and where a tenant's rows live.

- :mod:`~jobs.citus.cluster`: is this database a Citus coordinator; the distributed tables; their status.
- :mod:`~jobs.citus.routes`: which worker holds a tenant, so recall reads there (READ ONLY).
- :mod:`~jobs.citus.shards`: the statements of recall rewritten onto that tenant's shard tables.

On one PostgreSQL none of it runs. Submodules are imported where they are used: this file imports nothing.
"""
