"""The xDS stream protocols as pure state machines (SotW and delta), the events they report,
and responses encoded once for every stream."""
