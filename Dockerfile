# dragoman's image: `dragoman` as the entrypoint, run as a user without privileges.
#
# The base image is pinned by its exact version tag. Pin it by digest too when you publish
# (`docker buildx imagetools inspect python:3.11.12-slim-bookworm` prints it): a tag can be
# pushed again, a digest cannot. Both stages use the same one: the virtual environment built
# in the first runs on the Python of the second.

# Builds dragoman's wheel and installs it, with its runtime dependencies only (neither the
# test nor the demo extra), into a virtual environment without pip.
FROM python:3.11.12-slim-bookworm AS builder
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY dragoman ./dragoman
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
    && python -m venv --without-pip /opt/dragoman \
    && pip --python /opt/dragoman/bin/python install --no-cache-dir /wheels/dragoman-*.whl

FROM python:3.11.12-slim-bookworm
COPY --from=builder /opt/dragoman /opt/dragoman
ENV PATH=/opt/dragoman/bin:$PATH
# A fresh named volume mounted at /tls starts with this directory's owner, so that
# `dragoman certgen --out /tls` (docker-compose.yml) can write there as the user below.
RUN mkdir /tls && chown 65532:65532 /tls
# The same user as deploy/'s pods (runAsUser 65532). No HEALTHCHECK: Kubernetes probes
# /readyz and /healthz, and docker-compose.yml waits for what it needs.
USER 65532:65532
WORKDIR /
EXPOSE 18000
ENTRYPOINT ["dragoman"]
# Mutual TLS on xDS: mount the files `dragoman certgen --out /tls` writes (see docker-compose.yml).
CMD ["serve", "--manifests", "/manifests", "--xds-address", "0.0.0.0:18000", \
     "--xds-tls-cert", "/tls/server.crt", "--xds-tls-key", "/tls/server.key", \
     "--xds-tls-client-ca", "/tls/ca.crt"]
