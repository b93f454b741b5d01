"""One TLS context for all of a Locust process's users (FastHttpUser's ssl_context_factory).

geventhttpclient makes a context for each user's connection pool and, with Locust's insecure default,
loads the CA bundle into it although nothing is verified: ~20 ms of CPU per new HTTPS user
(benchmarks/loadgen-*, tls_user_setup_ms), so a process adding hundreds of users stalled for seconds and
missed the master's heartbeats. Sharing one unverified context keeps Locust's behaviour (insecure) at none
of that cost. gevent only: the kit's benchmark loads this module without Locust's.
"""
import functools
from typing import Any

import gevent.ssl


@functools.cache
def shared_context(cafile: str | None = None, **_: Any) -> gevent.ssl.SSLContext:
    """The process's context, made once; `cafile` (what geventhttpclient hands a factory) is not loaded."""
    return gevent.ssl._create_unverified_context()
