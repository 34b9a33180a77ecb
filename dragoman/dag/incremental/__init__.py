"""The build, kept up to date: after a change, rebuild only what the changed objects
contribute to.

`IncrementalBuild` gives the same Dag as a full build of the same store (a property test
checks it after random sequences of changes), reusing the parts of the previous Dag that
no changed object reaches: route entries, virtual hosts, statuses and load assignments.
A full build (`dag.build.build`) is its first build: the steps are ordered in one place.
"""

from dragoman.dag.incremental.builder import BuildKind, IncrementalBuild, full_build

__all__ = ["BuildKind", "IncrementalBuild", "full_build"]
