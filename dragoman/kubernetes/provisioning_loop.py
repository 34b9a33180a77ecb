"""`serve --kubernetes --provision`: after each build (and every `resync` seconds, which
also picks up changed EnvoyProxyParameters, not watched), the leader provisions each
accepted Gateway's Envoys and puts the outcome in the Gateway's status: the
`dragoman.dev/Provisioned` condition, and status.addresses from its Service.

After a build, only the Gateways whose objects changed are applied again (a build that
changed routes alone costs no request per Gateway); every resync applies them all, which
also puts back what someone changed or deleted by hand."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from dragoman.dag.model import Dag, ObjectStatus
from dragoman.kubernetes.client_errors import describe_error
from dragoman.kubernetes.provisioner import ObjectClient, ProvisionOutcome, provision, prune
from dragoman.objects import ObjectKey
from dragoman.provisioning.gateways import plan_gateways
from dragoman.provisioning.parameters import API_VERSION, EnvoyProxyParameters, parse_parameters
from dragoman.provisioning.plan import PROVISIONED, GatewayPlan
from dragoman.provisioning.workload import ProvisionSettings
from dragoman.store import Store

log = logging.getLogger("dragoman.kubernetes.provisioning")

PARAMETERS_PLURAL = "envoyproxyparameters"


class ProvisioningLoop:
    def __init__(self, client: Any, settings: ProvisionSettings, resync: float = 30.0) -> None:
        self.objects = ObjectClient(client)
        self.settings = settings
        self.resync = resync
        self.due = asyncio.Event()
        self.outcomes: dict[ObjectKey, ProvisionOutcome] = {}
        # What was last applied for each Gateway, and how it went.
        self._applied: dict[
            ObjectKey, tuple[tuple[dict[str, Any], ...], ProvisionOutcome | None]
        ] = {}

    async def run(
        self,
        stop: asyncio.Event,
        source: Callable[[], tuple[Store, Dag | None]],
        leading: Callable[[], bool],
        on_outcomes: Callable[[], None],
    ) -> None:
        """`source`: the store as read (parametersRefs in place) and the last build of it."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._due_or(stop), self.resync)
            resync = not self.due.is_set()
            self.due.clear()
            store, dag = source()
            if stop.is_set() or not leading() or dag is None:
                continue
            try:
                outcomes = await asyncio.to_thread(self.provision, store, dag, resync)
            except Exception as error:  # the API server away: the next pass tries again
                log.warning("provisioning: %s", describe_error(error))
                continue
            if outcomes != self.outcomes:
                self.outcomes = outcomes
                on_outcomes()

    async def _due_or(self, stop: asyncio.Event) -> None:
        waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self.due.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()

    def provision(
        self, store: Store, dag: Dag, resync: bool = True
    ) -> dict[ObjectKey, ProvisionOutcome]:
        """One pass (blocking): plan every accepted Gateway, apply (all of them on a
        resync, else those whose objects changed), prune."""
        plans = plan_gateways(store, dag, self.parameters(), self.settings)
        uids = {gateway.key: gateway.meta.uid for gateway in store.gateways.values()}
        outcomes = []
        for plan in plans:
            kept = None if resync else self._unchanged(plan)
            if kept is not None:
                outcomes.append(kept)
                continue
            outcome = provision(self.objects, plan, uids.get(plan.gateway, ""))
            self._applied[plan.gateway] = (plan.objects, outcome)
            outcomes.append(outcome)
        for gone in set(self._applied) - {plan.gateway for plan in plans}:
            del self._applied[gone]
        prune(self.objects, {(key.namespace, key.name): uid for key, uid in uids.items()})
        for outcome in outcomes:
            if outcome.condition["status"] != "True":
                log.warning(
                    "Gateway %s not provisioned: %s",
                    outcome.gateway,
                    outcome.condition["message"],
                )
        return {outcome.gateway: outcome for outcome in outcomes}

    def _unchanged(self, plan: GatewayPlan) -> ProvisionOutcome | None:
        """The outcome of the last apply when the same objects went well then."""
        last_objects, last = self._applied.get(plan.gateway, ((), None))
        if last is None or not plan.objects or plan.objects != last_objects:
            return None
        return last if last.condition["status"] == "True" else None  # failures: again

    def parameters(self) -> dict[tuple[str, str], EnvoyProxyParameters]:
        """Every EnvoyProxyParameters; none when its CRD is not installed."""
        items = self.objects.list_all(API_VERSION, PARAMETERS_PLURAL) or []
        found = {}
        for item in items:
            parsed = parse_parameters(item, item.get("metadata", {}).get("namespace", ""))
            found[(parsed.namespace, parsed.name)] = parsed
        return found

    def with_outcomes(
        self, statuses: Mapping[ObjectKey, ObjectStatus]
    ) -> dict[ObjectKey, ObjectStatus]:
        """The statuses to write, each provisioned Gateway's with its condition and, once
        its Service has them, its addresses."""
        result = dict(statuses)
        for key, outcome in self.outcomes.items():
            status = result.get(key)
            if status is None:
                continue
            stanza = dict(status.status)
            conditions = [c for c in stanza.get("conditions", ()) if c["type"] != PROVISIONED]
            stanza["conditions"] = [*conditions, outcome.condition]
            if outcome.addresses:
                stanza["addresses"] = [dict(address) for address in outcome.addresses]
            result[key] = ObjectStatus(key, status.api_version, stanza)
        return result
