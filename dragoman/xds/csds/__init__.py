"""Client Status Discovery Service: the servicer on the xDS server, and the client
`dragoman clients` asks it with."""
