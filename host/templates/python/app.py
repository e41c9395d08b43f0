"""The {{name}} tool component: each method of `Tools` is a tool of the exported interface."""

from wit_world import exports
from wit_world.imports import host


class Tools(exports.Tools):
    def greet(self, name: str) -> str:
        host.log(host.Level.INFO, "greeting")
        return f"Hello, {name}!"
