"""GatewayClasses: which name dragoman's controller, and so which Gateways dragoman serves."""

from __future__ import annotations

from dataclasses import dataclass

from dragoman.dag.model import Problem
from dragoman.dag.options import BuildOptions
from dragoman.objects import Gateway, GatewayClass
from dragoman.store import Store


@dataclass(frozen=True, slots=True)
class ClassVerdict:
    """One of dragoman's GatewayClasses; `problem` is why it is not accepted (None: it is)."""

    gateway_class: GatewayClass
    problem: Problem | None = None


@dataclass(frozen=True, slots=True)
class ClassDecision:
    """Whether a Gateway's class makes it dragoman's, and what its status should say."""

    ours: bool
    # Set when served without a class object, or when the class itself is not accepted.
    note: str = ""
    refused: bool = False  # ours, but its class is not accepted: not served


def class_verdicts(store: Store, options: BuildOptions) -> dict[str, ClassVerdict]:
    """dragoman's GatewayClasses by name; classes of other controllers are left alone."""
    verdicts = {}
    for gateway_class in sorted(store.gateway_classes.values(), key=lambda c: c.meta.name):
        if gateway_class.controller_name != options.controller_name:
            continue
        problem = None
        ref = gateway_class.parameters_ref
        if ref is not None:
            problem = Problem(
                object=gateway_class.key,
                field="spec.parametersRef",
                reason="InvalidParameters",
                message=f"dragoman takes no parameters; remove parametersRef "
                f"(it names {ref.kind} {ref.name!r})",
            )
        verdicts[gateway_class.meta.name] = ClassVerdict(gateway_class, problem)
    return verdicts


def class_decision(
    gateway: Gateway, store: Store, verdicts: dict[str, ClassVerdict], options: BuildOptions
) -> ClassDecision:
    name = gateway.gateway_class_name
    verdict = verdicts.get(name)
    if verdict is not None:
        if verdict.problem is not None:
            return ClassDecision(
                ours=True,
                refused=True,
                note=f"GatewayClass {name!r} is not accepted: {verdict.problem.message}",
            )
        return ClassDecision(ours=True)
    if ("", name) in store.gateway_classes or options.require_gateway_class:
        return ClassDecision(ours=False)
    return ClassDecision(
        ours=True,
        note=f"GatewayClass {name!r} does not exist; served because classes are optional in "
        f"manifest directories (add one with controllerName {options.controller_name!r})",
    )
