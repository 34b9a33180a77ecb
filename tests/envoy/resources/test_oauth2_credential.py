"""An OAuth2 credential as Envoy receives it: Envoy's OAuth2 injected credential in the
injector filter (the token endpoint's URI and cluster, the client id, scopes, retry
interval; the client's id and secret in the form body), the client secret in an SDS generic secret
alone, the token endpoint's cluster in CDS; what Envoy's own validation accepts, and what
`render` shows (the client secret redacted)."""

from __future__ import annotations

from pathlib import Path

from envoy.extensions.filters.http.credential_injector.v3 import credential_injector_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.http.injected_credentials.oauth2.v3 import oauth2_pb2

from dragoman.dag.model import Dag
from dragoman.envoy import translate
from dragoman.envoy.text.snapshot_yaml import REDACTED, render_yaml
from dragoman.envoy.text.yaml_text import dump_yaml
from dragoman.snapshots.resources import CLUSTER, LISTENER, ROUTE, SECRET, Snapshot
from tests.support.credentials import (
    CLIENT_SECRET,
    IDP,
    WORLD,
    credential_injector,
    injector_route,
    oauth2_injector,
)
from tests.support.envoy_checks import translated_bootstrap, validate
from tests.support.envoy_dags import envoy_binary, messages
from tests.support.status_builds import build_text

FILTER = "envoy.filters.http.credential_injector/default/tok"


def oauth2_dag(**fields: object) -> Dag:
    return build_text(
        *WORLD,
        *IDP,
        credential_injector("api-key", "api-key", "token", header="X-Api-Key"),
        oauth2_injector("tok", **fields),
        injector_route("tok", "api-key"),
    )


def snapshot(**fields: object) -> Snapshot:
    return translate(oauth2_dag(**fields))["default/gw"]


def oauth2_config(served: Snapshot) -> tuple[credential_injector_pb2.CredentialInjector, str]:
    [listener] = messages(served, LISTENER)
    manager = hcm_pb2.HttpConnectionManager()
    listener.filter_chains[0].filters[0].typed_config.Unpack(manager)
    [found] = [f for f in manager.http_filters if f.name == FILTER]
    assert found.disabled
    injector = credential_injector_pb2.CredentialInjector()
    found.typed_config.Unpack(injector)
    return injector, injector.credential.name


def test_the_filter_fetches_tokens_from_the_token_endpoint() -> None:
    served = snapshot(scopes=["read", "write"], tokenFetchRetryInterval="4s")
    injector, extension = oauth2_config(served)
    assert extension == "envoy.http.injected_credentials.oauth2"
    assert not injector.overwrite and not injector.allow_request_without_credential
    oauth2 = oauth2_pb2.OAuth2()
    injector.credential.typed_config.Unpack(oauth2)
    assert oauth2.token_endpoint.uri == "https://auth.example.com/oauth2/token"
    assert oauth2.token_endpoint.cluster == "default/idp/443"
    assert oauth2.token_endpoint.timeout.seconds == 5
    assert list(oauth2.scopes) == ["read", "write"]
    assert oauth2.token_fetch_retry_interval.seconds == 4
    credentials = oauth2.client_credentials
    assert credentials.client_id == "dragoman"
    # Envoy sends no Basic authentication yet: the form body, said so.
    assert credentials.auth_type == oauth2_pb2.OAuth2.URL_ENCODED_BODY
    assert credentials.client_secret.name == "credential/default/tok"
    assert credentials.client_secret.sds_config.HasField("ads")
    # The token endpoint is in CDS though no route forwards to it.
    assert "default/idp/443" in {c.name for c in messages(served, CLUSTER)}
    [table] = messages(served, ROUTE)
    enabling = [
        r.name for r in table.virtual_hosts[0].routes if FILTER in r.typed_per_filter_config
    ]
    assert enabling == ["default/r/rule/0"]


def test_without_a_retry_interval_envoys_default_applies() -> None:
    injector, _ = oauth2_config(snapshot())
    oauth2 = oauth2_pb2.OAuth2()
    injector.credential.typed_config.Unpack(oauth2)
    assert not oauth2.HasField("token_fetch_retry_interval")


def test_the_client_secret_travels_in_a_generic_secret_and_nowhere_else() -> None:
    served = snapshot()
    secrets = {s.name: s for s in messages(served, SECRET)}
    assert secrets["credential/default/tok"].generic_secret.secret.inline_bytes == CLIENT_SECRET
    for type_url in (LISTENER, ROUTE, CLUSTER):
        for resource in served.of_type(type_url).resources.values():
            assert CLIENT_SECRET not in resource.body and b"s3cr3t" not in resource.body


def test_render_redacts_the_client_secret() -> None:
    text = render_yaml(translate(oauth2_dag()))
    assert "s3cr3t" not in text and CLIENT_SECRET.decode() not in text
    assert f"generic_secret: '{REDACTED}'" in text
    assert "envoy.http.injected_credentials.oauth2" in text and "client_id: dragoman" in text


def test_envoy_accepts_the_translation(tmp_path: Path) -> None:
    config = translated_bootstrap(
        snapshot(scopes=["read"], tokenFetchRetryInterval="1s"), tmp_path / "admin.sock"
    )
    path = tmp_path / "oauth2.yaml"
    path.write_text(dump_yaml(config))
    validate(envoy_binary(), path)
