"""Incremental builds: after a change, rebuild only what the changed objects contribute to.

`IncrementalBuild` gives the same Dag as `dag.build.build` for every store (a property test
checks it after random sequences of changes), reusing the parts of the previous Dag that
no changed object reaches: route entries, virtual hosts, statuses and load assignments.
"""

from dragoman.dag.incremental.builder import IncrementalBuild

__all__ = ["IncrementalBuild"]
