# dragoman, with the sample echo backend the docker-compose demo uses.
FROM python:3.11-slim
WORKDIR /src
COPY pyproject.toml README.md ./
COPY dragoman ./dragoman
COPY examples ./examples
RUN pip install --no-cache-dir . && rm -rf /src
WORKDIR /
EXPOSE 18000
ENTRYPOINT ["dragoman"]
# Mutual TLS on xDS: mount the files `dragoman certgen --out /tls` writes (see docker-compose.yml).
CMD ["serve", "--manifests", "/manifests", "--xds-address", "0.0.0.0:18000", \
     "--xds-tls-cert", "/tls/server.crt", "--xds-tls-key", "/tls/server.key", \
     "--xds-tls-client-ca", "/tls/ca.crt"]
