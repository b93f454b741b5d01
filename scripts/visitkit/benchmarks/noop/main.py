"""A function that does nothing: the hot-path benchmark's yardstick for functions-framework itself.
It answers every path the visitor calls as the real functions would, without doing their work."""
from typing import TYPE_CHECKING

import functions_framework

if TYPE_CHECKING:
    import flask


@functions_framework.http
def noop(request: "flask.Request") -> tuple[str, int, dict[str, str]]:
    status = 202 if request.method == "POST" else 200
    return '{"visit_type": "home", "count": 0}', status, {"Content-Type": "application/json"}
