"""The running server around the pure core: the controller that turns stores into snapshots,
serving a manifest directory, the DNS checker and the server configuration file."""
