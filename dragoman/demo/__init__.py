"""Runtime pieces for `dragoman demo` and the end-to-end tests.

They ship in the package because the demo uses them: a DNS responder that
Envoy's c-ares resolver can be pointed at (`dns`), HTTP echo backends on
loopback addresses (`backends`), a supervised Envoy process with an admin
client over its UNIX socket (`envoy`), and small HTTP helpers (`http`).
"""
