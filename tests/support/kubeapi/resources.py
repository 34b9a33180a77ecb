"""The API resources the test server serves, and how each one behaves."""

from __future__ import annotations

from dataclasses import dataclass

GATEWAY_GROUP = "gateway.networking.k8s.io"


@dataclass(frozen=True)
class ResourceType:
    """One served resource (what `kubectl api-resources` lists) and its storage rules."""

    group: str  # "" for the core group
    versions: tuple[str, ...]  # served versions, preferred first; stored objects are version-free
    plural: str
    singular: str
    kind: str
    namespaced: bool
    status_subresource: bool
    # metadata.generation is maintained only by some strategies (custom resources,
    # EndpointSlices); Services, Secrets, ConfigMaps, Namespaces and Leases have none.
    tracks_generation: bool
    # Compiled-in types (not CRDs): list items carry no kind/apiVersion, strategic merge
    # patch is accepted.
    builtin: bool
    returns_deleted_object: bool = False
    allow_create_on_update: bool = False
    short_names: tuple[str, ...] = ()
    # Field selectors accepted beyond metadata.name and metadata.namespace.
    extra_field_labels: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """`plural.group`, the name kubectl and error messages use."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def preferred_version(self) -> str:
        return self.versions[0]

    def api_version(self, version: str | None = None) -> str:
        version = version or self.preferred_version
        return f"{self.group}/{version}" if self.group else version


def _core(plural: str, kind: str, **rules: object) -> ResourceType:
    defaults: dict[str, object] = {
        "namespaced": True,
        "status_subresource": False,
        "tracks_generation": False,
    }
    defaults.update(rules)
    return ResourceType(
        group="",
        versions=("v1",),
        plural=plural,
        singular=kind.lower(),
        kind=kind,
        builtin=True,
        **defaults,  # type: ignore[arg-type]
    )


def _gateway(
    plural: str, kind: str, versions: tuple[str, ...], short: tuple[str, ...] = (), **rules: object
) -> ResourceType:
    defaults: dict[str, object] = {"namespaced": True, "status_subresource": True}
    defaults.update(rules)
    return ResourceType(
        group=GATEWAY_GROUP,
        versions=versions,
        plural=plural,
        singular=kind.lower(),
        kind=kind,
        tracks_generation=True,
        builtin=False,
        short_names=short,
        **defaults,  # type: ignore[arg-type]
    )


# Scopes, versions and subresources follow the Gateway API v1.6.1 standard channel CRDs.
RESOURCE_TYPES: tuple[ResourceType, ...] = (
    _core(
        "namespaces",
        "Namespace",
        namespaced=False,
        status_subresource=True,
        returns_deleted_object=True,
        short_names=("ns",),
        extra_field_labels=("status.phase",),
    ),
    _core(
        "services",
        "Service",
        status_subresource=True,
        returns_deleted_object=True,
        allow_create_on_update=True,
        short_names=("svc",),
        extra_field_labels=("spec.clusterIP", "spec.type"),
    ),
    _core("secrets", "Secret", extra_field_labels=("type",)),
    _core("configmaps", "ConfigMap", short_names=("cm",)),
    ResourceType(
        group="discovery.k8s.io",
        versions=("v1",),
        plural="endpointslices",
        singular="endpointslice",
        kind="EndpointSlice",
        namespaced=True,
        status_subresource=False,
        tracks_generation=True,
        builtin=True,
    ),
    ResourceType(
        group="coordination.k8s.io",
        versions=("v1",),
        plural="leases",
        singular="lease",
        kind="Lease",
        namespaced=True,
        status_subresource=False,
        tracks_generation=False,
        builtin=True,
        allow_create_on_update=True,
    ),
    # What dragoman provisions for a Gateway (ConfigMaps and Services are above).
    _core("serviceaccounts", "ServiceAccount", short_names=("sa",)),
    ResourceType(
        group="apps",
        versions=("v1",),
        plural="deployments",
        singular="deployment",
        kind="Deployment",
        namespaced=True,
        status_subresource=True,
        tracks_generation=True,
        builtin=True,
        short_names=("deploy",),
    ),
    ResourceType(
        group="policy",
        versions=("v1",),
        plural="poddisruptionbudgets",
        singular="poddisruptionbudget",
        kind="PodDisruptionBudget",
        namespaced=True,
        status_subresource=True,
        tracks_generation=True,
        builtin=True,
        short_names=("pdb",),
    ),
    ResourceType(
        group="dragoman.dev",
        versions=("v1alpha1",),
        plural="envoyproxyparameters",
        singular="envoyproxyparameters",
        kind="EnvoyProxyParameters",
        namespaced=True,
        status_subresource=False,
        tracks_generation=True,
        builtin=False,
    ),
    _gateway("gatewayclasses", "GatewayClass", ("v1", "v1beta1"), ("gc",), namespaced=False),
    _gateway("gateways", "Gateway", ("v1", "v1beta1"), ("gtw",)),
    _gateway("httproutes", "HTTPRoute", ("v1", "v1beta1")),
    _gateway("grpcroutes", "GRPCRoute", ("v1",)),
    _gateway("tcproutes", "TCPRoute", ("v1",)),
    _gateway("tlsroutes", "TLSRoute", ("v1",)),
    _gateway("udproutes", "UDPRoute", ("v1",)),
    _gateway("listenersets", "ListenerSet", ("v1",), ("lset",)),
    _gateway(
        "referencegrants",
        "ReferenceGrant",
        ("v1", "v1beta1"),
        ("refgrant",),
        status_subresource=False,
    ),
    _gateway("backendtlspolicies", "BackendTLSPolicy", ("v1",), ("btlspolicy",)),
    # The experimental channel's (tests withdraw it to see a cluster without that CRD).
    ResourceType(
        group="gateway.networking.x-k8s.io",
        versions=("v1alpha1",),
        plural="xbackends",
        singular="xbackend",
        kind="XBackend",
        namespaced=True,
        status_subresource=True,
        tracks_generation=True,
        builtin=False,
        short_names=("xbackend",),
    ),
    # Experimental channel (GEP-3388).
    ResourceType(
        group="gateway.networking.x-k8s.io",
        versions=("v1alpha1",),
        plural="xbackendtrafficpolicies",
        singular="xbackendtrafficpolicy",
        kind="XBackendTrafficPolicy",
        namespaced=True,
        status_subresource=True,
        tracks_generation=True,
        builtin=False,
        short_names=("xbtrafficpolicy",),
    ),
    # dragoman's own CRD (deploy/crds/backendpolicies.yaml).
    ResourceType(
        group="dragoman.dev",
        versions=("v1alpha1",),
        plural="backendpolicies",
        singular="backendpolicy",
        kind="BackendPolicy",
        namespaced=True,
        status_subresource=True,
        tracks_generation=True,
        builtin=False,
    ),
    # dragoman's own kinds, as its CRDs in deploy/ declare them.
    ResourceType(
        group="dragoman.dev",
        versions=("v1alpha1",),
        plural="credentialinjectors",
        singular="credentialinjector",
        kind="CredentialInjector",
        namespaced=True,
        status_subresource=True,
        tracks_generation=True,
        builtin=False,
    ),
)


class ResourceRegistry:
    """Looks resource types up the ways URLs, manifests and tests name them."""

    def __init__(self, types: tuple[ResourceType, ...] = RESOURCE_TYPES) -> None:
        self.types = types
        self._by_path = {(t.group, v, t.plural): t for t in types for v in t.versions}

    def for_path(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def for_object(self, obj: dict) -> tuple[ResourceType, str]:
        """The type and version named by a manifest's apiVersion and kind."""
        group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
        for rtype in self.types:
            if rtype.group == group and version in rtype.versions and rtype.kind == obj.get("kind"):
                return rtype, version
        raise KeyError(f"not served: {obj.get('apiVersion')} {obj.get('kind')}")

    def find(self, name: str) -> ResourceType:
        """By kind, plural, singular, short name or `plural.group` (what tests find handy)."""
        lowered = name.lower()
        for rtype in self.types:
            names = {rtype.kind.lower(), rtype.plural, rtype.singular, rtype.key}
            if lowered in names or lowered in rtype.short_names:
                return rtype
        raise KeyError(f"no served resource is called {name!r}")

    def groups(self) -> list[str]:
        """Named API groups (not the core group), in first-served order."""
        seen: list[str] = []
        for rtype in self.types:
            if rtype.group and rtype.group not in seen:
                seen.append(rtype.group)
        return seen

    def versions_of(self, group: str) -> list[str]:
        versions: list[str] = []
        for rtype in self.types:
            if rtype.group == group:
                versions.extend(v for v in rtype.versions if v not in versions)
        return versions

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [t for t in self.types if t.group == group and version in t.versions]
