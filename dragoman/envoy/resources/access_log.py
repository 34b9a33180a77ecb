"""Access logs of Gateway listeners: one line per request on Envoy's standard output, as JSON
(the default: log pipelines parse it without a grammar) or as Envoy's default text line."""

from __future__ import annotations

from collections.abc import Mapping

from envoy.config.accesslog.v3 import accesslog_pb2
from envoy.config.core.v3 import substitution_format_string_pb2
from envoy.extensions.access_loggers.stream.v3 import stream_pb2
from google.protobuf.struct_pb2 import Struct

from dragoman.envoy.resources.common_messages import pack
from dragoman.envoy.translate_options import ACCESS_LOG_FORMATS, AccessLogFormat

STDOUT_ACCESS_LOG = "envoy.access_loggers.stdout"

# Field: Envoy command operator. Request and response sizes, timing, where it went and why.
JSON_FIELDS = {
    "start_time": "%START_TIME%",
    "method": "%REQ(:METHOD)%",
    "path": "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%",
    "protocol": "%PROTOCOL%",
    "authority": "%REQ(:AUTHORITY)%",
    "response_code": "%RESPONSE_CODE%",
    "response_flags": "%RESPONSE_FLAGS%",
    "response_code_details": "%RESPONSE_CODE_DETAILS%",
    "grpc_status": "%GRPC_STATUS_NUMBER%",
    "bytes_received": "%BYTES_RECEIVED%",
    "bytes_sent": "%BYTES_SENT%",
    "duration_ms": "%DURATION%",
    "upstream_service_time_ms": "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%",
    "upstream_host": "%UPSTREAM_HOST%",
    "upstream_cluster": "%UPSTREAM_CLUSTER%",
    # What tells an ejected host, an overflow and a TLS failure to a partner apart, with
    # response_flags: how many tries the router made, why the upstream connection failed
    # (Envoy no longer puts TLS failure reasons in response bodies), the SNI Envoy sent (only
    # once a handshake completed: Envoy keeps it with the connection's TLS details), and the
    # endpoint's DNS name (an external name: the SNI unless a BackendTLSPolicy names one).
    "upstream_request_attempt_count": "%UPSTREAM_REQUEST_ATTEMPT_COUNT%",
    "upstream_transport_failure_reason": "%UPSTREAM_TRANSPORT_FAILURE_REASON%",
    "upstream_server_name": "%UPSTREAM_SERVER_NAME%",
    "upstream_host_name": "%UPSTREAM_HOST_NAME%",
    "route_name": "%ROUTE_NAME%",
    "downstream_remote_address": "%DOWNSTREAM_REMOTE_ADDRESS%",
    "x_forwarded_for": "%REQ(X-FORWARDED-FOR)%",
    "user_agent": "%REQ(USER-AGENT)%",
    "request_id": "%REQ(X-REQUEST-ID)%",
    "listener": "%DOWNSTREAM_LOCAL_ADDRESS%",
}


# The same for a connection (TCP, TLS) or a UDP session: no request, so no HTTP fields; the
# SNI the client sent instead.
L4_JSON_FIELDS = {
    "start_time": "%START_TIME%",
    "bytes_received": "%BYTES_RECEIVED%",
    "bytes_sent": "%BYTES_SENT%",
    "duration_ms": "%DURATION%",
    "response_flags": "%RESPONSE_FLAGS%",
    "upstream_host": "%UPSTREAM_HOST%",
    "upstream_cluster": "%UPSTREAM_CLUSTER%",
    "upstream_transport_failure_reason": "%UPSTREAM_TRANSPORT_FAILURE_REASON%",
    "requested_server_name": "%REQUESTED_SERVER_NAME%",
    "downstream_remote_address": "%DOWNSTREAM_REMOTE_ADDRESS%",
    "listener": "%DOWNSTREAM_LOCAL_ADDRESS%",
}


def access_logs(
    log_format: AccessLogFormat, fields_of_json: Mapping[str, str] = JSON_FIELDS
) -> list[accesslog_pb2.AccessLog]:
    """The access_log of a Gateway listener's connection manager ([] for "off"); with
    L4_JSON_FIELDS, of its TCP or UDP proxy."""
    if log_format == "off":
        return []
    if log_format not in ACCESS_LOG_FORMATS:
        raise ValueError(f"access log format must be one of {ACCESS_LOG_FORMATS}")
    stdout = stream_pb2.StdoutAccessLog()
    if log_format == "json":
        fields = Struct()
        fields.update(fields_of_json)
        stdout.log_format.CopyFrom(
            substitution_format_string_pb2.SubstitutionFormatString(json_format=fields)
        )
    # "text": no log_format, Envoy's default format line.
    return [accesslog_pb2.AccessLog(name=STDOUT_ACCESS_LOG, typed_config=pack(stdout))]
