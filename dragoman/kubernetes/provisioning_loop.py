"""`serve --kubernetes --provision`: after each build, each change to an EnvoyProxyParameters
(watched) and every `resync` seconds, the leader provisions each accepted Gateway's Envoys
and puts the outcome in the Gateway's status: the `dragoman.dev/Provisioned` condition, and
status.addresses from its Service.

After a build or a parameters change, only the Gateways whose objects changed are applied
again (a build that changed routes alone costs no request per Gateway); every resync
applies them all, which also puts back what someone changed or deleted by hand, and issues
again the xDS certificates (when dragoman issues them) that near their end."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from dragoman.dag.model import Dag, ObjectStatus
from dragoman.kubernetes.client_errors import describe_error
from dragoman.kubernetes.gateway_certificates import Signer, load_signer
from dragoman.kubernetes.informer import WatchSettings
from dragoman.kubernetes.parameters_watch import PARAMETERS_KIND, ParametersWatch
from dragoman.kubernetes.provisioner import (
    ObjectClient,
    ProvisionOutcome,
    provision,
    prune,
    pruned_kinds,
)
from dragoman.objects import ObjectKey
from dragoman.provisioning.gateways import plan_gateways
from dragoman.provisioning.parameters import API_VERSION, EnvoyProxyParameters, parse_parameters
from dragoman.provisioning.plan import PROVISIONED, GatewayPlan
from dragoman.provisioning.workload import ProvisionSettings
from dragoman.store import Store

log = logging.getLogger("dragoman.kubernetes.provisioning")


class ProvisioningLoop:
    def __init__(
        self,
        client: Any,
        settings: ProvisionSettings,
        resync: float = 30.0,
        watch: WatchSettings | None = None,
    ) -> None:
        self.client = client
        self.objects = ObjectClient(client)
        self.settings = settings
        self.resync = resync
        self.watch_settings = watch or WatchSettings()
        self.watch: ParametersWatch | None = None  # while `run` runs
        self.due = asyncio.Event()
        self._leading = False  # at the last pass
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
        self.watch = ParametersWatch(
            self.client, self.watch_settings, asyncio.get_running_loop(), self.due.set
        )
        self.watch.start()
        try:
            await self._run(stop, source, leading, on_outcomes)
        finally:
            watch, self.watch = self.watch, None
            await asyncio.to_thread(watch.stop)

    async def _run(
        self,
        stop: asyncio.Event,
        source: Callable[[], tuple[Store, Dag | None]],
        leading: Callable[[], bool],
        on_outcomes: Callable[[], None],
    ) -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._due_or(stop), self.resync)
            resync = not self.due.is_set()
            self.due.clear()
            store, dag = source()
            if stop.is_set() or not leading() or dag is None:
                self._leading = False
                continue
            resync = resync or not self._leading  # a new leader applies everything
            self._leading = True
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
        signer: Signer | None = None
        for plan in plans:
            kept = None if resync else self._unchanged(plan)
            if kept is not None:
                outcomes.append(kept)
                continue
            if signer is None and self.settings.ca_secret:  # read once a pass, if needed
                signer = load_signer(
                    self.objects, self.settings.ca_secret, self.settings.renew_before
                )
            outcome = provision(self.objects, plan, uids.get(plan.gateway, ""), signer)
            self._applied[plan.gateway] = (plan.objects, outcome)
            outcomes.append(outcome)
        for gone in set(self._applied) - {plan.gateway for plan in plans}:
            del self._applied[gone]
        gateways = {(key.namespace, key.name): uid for key, uid in uids.items()}
        prune(self.objects, gateways, pruned_kinds(bool(self.settings.ca_secret)))
        for outcome in outcomes:
            if outcome.condition["status"] != "True":
                log.warning(
                    "Gateway %s not provisioned: %s",
                    outcome.gateway,
                    outcome.condition["message"],
                )
        return {outcome.gateway: outcome for outcome in outcomes}

    def _unchanged(self, plan: GatewayPlan) -> ProvisionOutcome | None:
        """The outcome of the last apply of the same objects when it went well, or when it
        was refused part way and rolled back (tried again at the resync); other failures
        are tried again at once."""
        last_objects, last = self._applied.get(plan.gateway, ((), None))
        if last is None or not plan.objects or plan.objects != last_objects:
            return None
        return last if last.condition["status"] == "True" or last.rolled_back else None

    def parameters(self) -> dict[tuple[str, str], EnvoyProxyParameters]:
        """Every EnvoyProxyParameters; none when its CRD is not installed. Those watched,
        once listed; listed here before that (or when not run)."""
        if self.watch is not None and self.watch.synced:
            return self.watch.parameters()
        items = self.objects.list_all(API_VERSION, PARAMETERS_KIND.plural) or []
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
