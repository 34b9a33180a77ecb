"""`dragoman provision`: print the objects dragoman would create for each Gateway.

Without a cluster: for review, or to apply them without giving dragoman the permission to
create anything. What is wrong with a Gateway's provisioning (its parameters, a port, a
name another object holds) is printed as its `dragoman.dev/Provisioned` condition, and
nothing is printed for that Gateway.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from dragoman.commands.common import (
    add_config,
    add_logging,
    host_port,
    manifest_dir,
    server_config,
)

if TYPE_CHECKING:
    from dragoman.provisioning.plan import GatewayPlan


def add_parser(commands: argparse._SubParsersAction) -> None:
    from dragoman.provisioning.workload import ProvisionSettings

    defaults = ProvisionSettings()
    parser = commands.add_parser(
        "provision",
        help="print the Deployment, Service, ... dragoman would create for each Gateway",
        description="Print, as YAML, the objects dragoman would provision for each Gateway "
        "of the manifests (no cluster needed); exits 1 if a Gateway cannot be provisioned.",
    )
    parser.add_argument("--manifests", type=manifest_dir, required=True, metavar="DIR")
    parser.add_argument(
        "--xds-address",
        type=host_port,
        default=defaults.xds_address,
        metavar="HOST:PORT",
        help=f"where the Envoys reach dragoman (default: {defaults.xds_address})",
    )
    parser.add_argument(
        "--xds-server-name",
        default=defaults.xds_server_name,
        metavar="NAME",
        help=f"the name dragoman's certificate carries (default: {defaults.xds_server_name})",
    )
    parser.add_argument(
        "--drain-image",
        default=defaults.drain_image,
        metavar="IMAGE",
        help=f"dragoman's image, for the drain container (default: {defaults.drain_image})",
    )
    parser.add_argument(
        "--cert-manager-issuer",
        type=_issuer,
        metavar="KIND/NAME",
        help="add a cert-manager Certificate issuing each Gateway's xDS client certificate "
        "into its Secret, from this Issuer or ClusterIssuer (e.g. ClusterIssuer/dragoman-ca)",
    )
    add_config(parser)
    add_logging(parser)
    parser.set_defaults(run=run)


def _issuer(value: str) -> str:
    kind, _, name = value.partition("/")
    if kind not in ("Issuer", "ClusterIssuer") or not name:
        raise argparse.ArgumentTypeError(
            f"expected Issuer/NAME or ClusterIssuer/NAME, got {value!r}"
        )
    return value


def run(args: argparse.Namespace) -> int:
    from dragoman.commands.common import checked_build, loaded_store
    from dragoman.provisioning.gateways import plan_gateways
    from dragoman.provisioning.manifest_inputs import read_provision_inputs
    from dragoman.provisioning.resolve import claim_parameters
    from dragoman.provisioning.workload import ProvisionSettings

    config = server_config(args)
    if config is None:
        return 2
    try:
        store = loaded_store(args.manifests)
        inputs = read_provision_inputs(args.manifests)
    except OSError as error:
        print(f"error: cannot read: {error.strerror or error}", file=sys.stderr)
        return 2
    dag = checked_build(claim_parameters(store), config.build_options(), config)
    provision = ProvisionSettings(
        xds_address=args.xds_address,
        xds_server_name=args.xds_server_name,
        drain_image=args.drain_image,
        certificate_issuer=args.cert_manager_issuer or "",
    )
    plans = plan_gateways(store, dag, inputs.parameters, provision, inputs.existing)
    sys.stdout.write(plans_yaml(plans))
    for plan in plans:
        for problem in plan.problems:
            print(f"problem: {problem}", file=sys.stderr)
    return 1 if any(plan.problems for plan in plans) else 0


def _block_dumper() -> type:
    import yaml

    class BlockDumper(yaml.SafeDumper):
        """Text of several lines (the bootstrap) as a `|` block, readable in review."""

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    BlockDumper.add_representer(str, text)
    return BlockDumper


def plans_yaml(plans: list[GatewayPlan]) -> str:
    """Every plan's objects as one YAML stream, each Gateway's introduced by its condition
    (as comments: the objects alone are what `kubectl apply -f` reads)."""
    import yaml

    block_dumper = _block_dumper()
    parts = []
    for plan in plans:
        condition = plan.condition()
        header = [
            f"# {plan.gateway}: {condition['type']}={condition['status']} ({condition['reason']})",
            *(f"#   {line}" for line in condition["message"].split("; ")),
        ]
        if not plan.problems and not any(o["kind"] == "Certificate" for o in plan.objects):
            header.append(
                f"#   the Secret {plan.xds_secret} must hold a client certificate for "
                f"{plan.identity} (tls.crt, tls.key, ca.crt)"
            )
        documents = [yaml.dump(obj, Dumper=block_dumper, sort_keys=False) for obj in plan.objects]
        parts.append("\n".join(header) + "\n" + "---\n".join(documents))
    return "---\n".join(parts)
