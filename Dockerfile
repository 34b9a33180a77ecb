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
CMD ["serve", "--manifests", "/manifests", "--xds-address", "0.0.0.0:18000"]
