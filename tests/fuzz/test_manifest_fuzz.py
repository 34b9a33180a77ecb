"""A bounded, seeded slice of the manifest fuzzer (benchmarks/fuzz.py runs it for longer).

Every mutant of the every-feature manifest set is loaded, built and translated without an
exception, within bounded time and memory; the files it did not touch keep being served; an
object it made vanish is reported; and every distinct resource served over all mutants
passes the real Envoy's `envoy --mode validate` (batched: a few runs for the lot).
"""

from __future__ import annotations

from pathlib import Path

from tests.support.envoy_dags import envoy_binary
from tests.support.manifest_fuzzer import (
    EnvoyBatch,
    check_outcome,
    expected_keys,
    mutants,
    run_mutant,
)

SEED = 20261124
MUTANTS = 200


def test_mutants_load_build_and_translate_within_bounds(tmp_path: Path) -> None:
    expected = expected_keys()
    batch = EnvoyBatch()
    failures: list[str] = []
    kinds: set[str] = set()
    directory = tmp_path / "manifests"
    directory.mkdir()
    for mutant in mutants(SEED, MUTANTS):
        outcome = run_mutant(mutant, directory)
        failures += [
            f"mutant {mutant.index} ({mutant.description[:200]}): {failure[:2000]}"
            for failure in check_outcome(outcome, expected)
        ]
        kinds.add(mutant.description.split(": ", 1)[1].split(" ", 1)[0])
        batch.add(outcome)
    assert not failures, "\n".join(failures)
    # The slice exercises more than one kind of mutation, and serves what Envoy checks.
    assert len(kinds) > 10, kinds
    assert len(batch.listeners) > 10 and len(batch.clusters) > 10

    runs, refused = batch.validate(envoy_binary(), tmp_path)

    assert not refused, "\n".join(refused)
    assert runs <= 3


def test_envoy_validation_of_the_batch_finds_a_refused_resource(tmp_path: Path) -> None:
    """A negative control: a listener Envoy must refuse, among good ones, is found and named."""
    batch = EnvoyBatch()
    directory = tmp_path / "manifests"
    directory.mkdir()
    for mutant in mutants(SEED, 5):
        batch.add(run_mutant(mutant, directory))
    good = len(batch.listeners)
    mapping, _ = next(iter(batch.listeners.values()))
    broken = {**mapping, "name": "broken", "per_connection_buffer_limit_bytes": -1}
    batch.listeners["broken"] = (broken, "the negative control")

    _, refused = batch.validate(envoy_binary(), tmp_path)

    assert good > 1
    assert len(refused) == 1 and "the negative control" in refused[0], refused
