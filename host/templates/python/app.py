"""The {{name}} tool component: each method of `Tools` is a tool of the exported interface."""

from wit_world import exports
from wit_world.imports import host


class Tools(exports.Tools):
    def greet(self, name: str) -> str:
        # Who called and which call this is, from the host (never from the arguments). A tool
        # that changes something elsewhere sends ctx.idempotency_key with its request (e.g. an
        # Idempotency-Key header), so that a retry of this call cannot do it twice.
        ctx = host.context()
        host.log(host.Level.INFO, f"greeting for {ctx.principal} (key {ctx.idempotency_key})")
        return f"Hello, {name}!"
