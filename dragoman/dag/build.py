"""The DAG build: a Store in, a Dag out. Pure: no I/O, no clock, no shared state.

A full build is the incremental builder's from nothing (dag/incremental/builder.py holds
the order of the steps, once): the Dag of a store is the same whichever way it was made.
"""

from __future__ import annotations

from dragoman.dag.dns_check import DnsObservations
from dragoman.dag.incremental.builder import full_build
from dragoman.dag.model import Dag
from dragoman.dag.options import BuildOptions
from dragoman.store import Store


# BuildOptions is frozen, so one shared default instance is safe.
def build(
    store: Store, options: BuildOptions = BuildOptions(), dns: DnsObservations | None = None
) -> Dag:
    """Listeners, route tables and clusters per node group, and every problem found.

    `dns`: what the DNS check last observed per external name (used when options.dns_check).
    """
    return full_build(store, options, dns)
