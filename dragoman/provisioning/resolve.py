"""Which settings a Gateway's Envoys get: its GatewayClass's parameters, then its own.

Provisioning reads the parametersRefs naming EnvoyProxyParameters; `claim_parameters`
takes those off the objects before the build judges them (the build refuses every
parametersRef it does not read), so a Gateway whose parameters are wrong is still accepted
and served, and its `dragoman.dev/Provisioned` condition says what is wrong.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TypeVar

from dragoman.dag.model import Problem
from dragoman.objects import Gateway, GatewayClass
from dragoman.objects.gateway_class import ParametersRef
from dragoman.provisioning.parameters import (
    GROUP,
    KIND,
    NO_SETTINGS,
    EnvoyProxyParameters,
    EnvoyProxySettings,
    is_parameters_ref,
)
from dragoman.store import Store

_Referring = TypeVar("_Referring", Gateway, GatewayClass)
ParametersByKey = Mapping[tuple[str, str], EnvoyProxyParameters]


def claim_parameters(store: Store) -> Store:
    """The store with every parametersRef to EnvoyProxyParameters taken off its Gateway or
    GatewayClass: those are provisioning's to judge, not the build's."""
    gateways = {key: _unreferenced(gateway) for key, gateway in store.gateways.items()}
    classes = {key: _unreferenced(cls) for key, cls in store.gateway_classes.items()}
    return dataclasses.replace(store, gateways=gateways, gateway_classes=classes)


def _unreferenced(obj: _Referring) -> _Referring:
    ref = obj.parameters_ref
    if ref is None or not is_parameters_ref(ref):
        return obj
    return dataclasses.replace(obj, parameters_ref=None)


def resolve_settings(
    gateway: Gateway, gateway_class: GatewayClass | None, parameters: ParametersByKey
) -> tuple[EnvoyProxySettings, list[Problem]]:
    """The class's settings overridden by the Gateway's; problems name the reference."""
    problems: list[Problem] = []
    settings = NO_SETTINGS
    if gateway_class is not None and gateway_class.parameters_ref is not None:
        found = _resolve(
            gateway,
            gateway_class.parameters_ref,
            gateway_class.parameters_ref.namespace,
            f"GatewayClass {gateway_class.meta.name!r} spec.parametersRef",
            parameters,
            problems,
        )
        settings = settings.overridden_by(found)
    if gateway.parameters_ref is not None:
        found = _resolve(
            gateway,
            gateway.parameters_ref,
            gateway.meta.namespace,
            "spec.infrastructure.parametersRef",
            parameters,
            problems,
        )
        settings = settings.overridden_by(found)
    return settings, problems


def _resolve(
    gateway: Gateway,
    ref: ParametersRef,
    namespace: str | None,
    field: str,
    parameters: ParametersByKey,
    problems: list[Problem],
) -> EnvoyProxySettings:
    def refuse(message: str) -> EnvoyProxySettings:
        problems.append(Problem(gateway.key, field, "InvalidParameters", message))
        return NO_SETTINGS

    if not is_parameters_ref(ref):
        return refuse(f"names {ref.group}/{ref.kind}; dragoman reads {GROUP}/{KIND} only")
    if not namespace:
        return refuse(f"{KIND} is namespaced: the reference needs a namespace")
    found = parameters.get((namespace, ref.name))
    if found is None:
        return refuse(f"{KIND} {namespace}/{ref.name} does not exist")
    if found.problems:
        wrong = "; ".join(f"{path}: {message}" for path, message in found.problems)
        return refuse(f"{KIND} {namespace}/{ref.name} is refused: {wrong}")
    return found.settings
