"""Gateway status.addresses: where clients reach a Gateway, and what became of the
addresses a Gateway asked for in spec.addresses.

dragoman assigns no addresses itself: the Envoys it configures are reached through
whatever the operator names (`--gateway-address`) or through the load balancer of the
Service in front of them. A requested address among those is honoured (status.addresses
lists exactly the requested ones); one that is not, or one asking dragoman to choose, is
reported with Programmed=False, reason AddressNotAssigned; a type other than IPAddress or
Hostname makes the Gateway Accepted=False, reason UnsupportedAddress, as the Gateway API
specifies. Pure.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Mapping
from typing import Any

from dragoman.dag.conditions import condition
from dragoman.dag.model import ObjectStatus, Problem
from dragoman.dag.options import BuildOptions
from dragoman.objects import Gateway, ObjectKey
from dragoman.store import Store

IP_ADDRESS = "IPAddress"
HOSTNAME = "Hostname"
UNSUPPORTED_ADDRESS = "UnsupportedAddress"
ADDRESS_NOT_ASSIGNED = "AddressNotAssigned"


def available_addresses(store: Store, options: BuildOptions) -> tuple[str, ...]:
    found = list(options.gateway_addresses)
    if options.address_service is not None:
        service = store.services.get(options.address_service)
        if service is not None:
            found.extend(service.load_balancer_ingress)
    return tuple(dict.fromkeys(found))


def address_type(value: str) -> str:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return HOSTNAME
    return IP_ADDRESS


def with_gateway_addresses(
    statuses: dict[ObjectKey, ObjectStatus], store: Store, options: BuildOptions
) -> list[Problem]:
    """Adds status.addresses (and address conditions) to each Gateway status in `statuses`,
    in place; returns the problems found in spec.addresses."""
    available = available_addresses(store, options)
    configured = bool(options.gateway_addresses) or options.address_service is not None
    problems: list[Problem] = []
    for key, status in list(statuses.items()):
        if key.kind != "Gateway":
            continue
        gateway = store.gateways.get((key.namespace, key.name))
        if gateway is None:
            continue
        addresses, found = _assigned(gateway, available)
        problems.extend(found)
        updated: dict[str, Any] = dict(status.status)
        # Written, even empty, whenever addresses are configured: a load balancer address
        # that went away must leave the status too (the writer keeps fields not computed).
        if addresses or configured:
            updated["addresses"] = [{"type": address_type(a), "value": a} for a in addresses]
        if found:
            updated["conditions"] = _with_problems(
                updated.get("conditions", []), found, gateway.meta.generation
            )
        statuses[key] = dataclasses.replace(status, status=updated)
    return problems


def _assigned(gateway: Gateway, available: tuple[str, ...]) -> tuple[list[str], list[Problem]]:
    if not gateway.addresses:
        return list(available), []
    problems: list[Problem] = []
    honoured: list[str] = []
    for index, requested in enumerate(gateway.addresses):
        where = f"spec.addresses[{index}]"
        if requested.type not in (IP_ADDRESS, HOSTNAME):
            problems.append(
                Problem(
                    gateway.key,
                    where,
                    UNSUPPORTED_ADDRESS,
                    f"address type {requested.type!r} is not supported: dragoman supports "
                    "IPAddress and Hostname",
                )
            )
        elif not requested.value:
            problems.append(
                Problem(
                    gateway.key,
                    where,
                    ADDRESS_NOT_ASSIGNED,
                    f"dragoman does not choose addresses: name a {requested.type} among the "
                    f"Gateway addresses it serves ({_listing(available)})",
                )
            )
        elif requested.value not in available or address_type(requested.value) != requested.type:
            problems.append(
                Problem(
                    gateway.key,
                    where,
                    ADDRESS_NOT_ASSIGNED,
                    f"{requested.type} {requested.value!r} is not an address the Envoys are "
                    f"reached at ({_listing(available)})",
                )
            )
        else:
            honoured.append(requested.value)
    return (honoured if not problems else list(available)), problems


def _listing(available: tuple[str, ...]) -> str:
    if not available:
        return "none is configured: see --gateway-address and --envoy-service"
    return "configured: " + ", ".join(available)


def _with_problems(
    conditions: list[Mapping[str, Any]], problems: list[Problem], generation: int
) -> list[Mapping[str, Any]]:
    unsupported = [p for p in problems if p.reason == UNSUPPORTED_ADDRESS]
    not_assigned = [p for p in problems if p.reason == ADDRESS_NOT_ASSIGNED]
    replaced: dict[str, Mapping[str, Any]] = {}
    if unsupported:
        message = "; ".join(f"{p.field}: {p.message}" for p in unsupported)
        replaced["Accepted"] = condition(
            "Accepted", False, UNSUPPORTED_ADDRESS, message, generation
        )
    if not_assigned or unsupported:
        chosen = not_assigned or unsupported
        message = "; ".join(f"{p.field}: {p.message}" for p in chosen)
        reason = ADDRESS_NOT_ASSIGNED if not_assigned else "Invalid"
        replaced["Programmed"] = condition("Programmed", False, reason, message, generation)
    return [replaced.get(c.get("type", ""), c) for c in conditions]
