"""Cloud Run's front, as Google documents it, in the twin's HAProxy: who may reach a function.

The local twin lets every request through to a function; a rehearsal of the Google Cloud run
(visitkit.rehearsal) puts the deployment's own access rules in front of it, taken from the applied
Terraform state, so that the kit meets what Cloud Run would answer:
- 404 for a path no function is deployed on (HAProxy's front end already answers it);
- on a service that does not grant run.invoker to allUsers, a request needs
  `Authorization: Bearer ID_TOKEN`: without one, 403; with a token whose signature (against the
  public key Google signs with, here the control plane stand-in's), expiry or audience
  does not check, 401; with a good token of a principal the service does not grant run.invoker, 403
  (https://cloud.google.com/run/docs/authenticating/service-to-service, "401 and 403";
  the audience is the service's run.app URL or one of its custom audiences:
  https://cloud.google.com/run/docs/configuring/custom-audiences);
- 429 past max instances x concurrency after the queue wait (haproxy.py, as on the twin);
- Pub/Sub's push carries the push account's OIDC token, checked like any other on store-inc-counter.

The checks are HAProxy's own (jwt_verify, jwt_payload_query: HAProxy 2.5 and later), so the
requests of a load run pay for them in the same process that limits the functions.
"""
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

# Google's front answers these as HTML pages; the kit reads only the status.
FORBIDDEN = "<html><body><h1>403 Forbidden</h1>Your client does not have permission to get this URL.</body></html>"
UNAUTHORIZED = ("<html><body><h1>401 Unauthorized</h1>Your client does not have permission to the requested URL."
                "</body></html>")


@dataclass(frozen=True)
class Service:
    """One function as deployed: its limits, environment and who may invoke it."""
    max_instances: int
    concurrency: int
    timeout_seconds: int
    environment: Mapping[str, str]
    url: str  # where a client calls it (cloudfunctions.net), as Terraform's output gives it
    uri: str  # its Cloud Run service's run.app URL: the audience Cloud Run always accepts
    invokers: tuple[str, ...]  # members granted run.invoker: "allUsers", "serviceAccount:E", "user:E"
    custom_audiences: tuple[str, ...] = ()

    @property
    def public(self) -> bool:
        return "allUsers" in self.invokers

    @property
    def audiences(self) -> tuple[str, ...]:
        return (self.uri, *self.custom_audiences)

    @property
    def invoker_emails(self) -> tuple[str, ...]:
        """The e-mail of each principal an ID token may name in its `email` claim."""
        return tuple(member.split(":", 1)[1] for member in self.invokers
                     if member.startswith(("serviceAccount:", "user:")))


@dataclass(frozen=True)
class Deployment:
    """What the front and the functions take from an applied deployment (visitkit.rehearsal)."""
    project: str
    topic: str
    subscription: str
    dead_letter_topic: str | None
    services: Mapping[str, Service]  # by logical function name (visitkit.catalogue)
    public_key: Path  # PEM of the public key Google signs ID tokens with (HAProxy 2.6 reads a key, not a certificate)
    # Pub/Sub's push: the push account's e-mail and the audience of its tokens; None in pull mode
    push_email: str | None = None
    push_audience: str | None = None
    token_endpoint: str | None = None  # where the push relay gets the push account's tokens
    extra: Mapping[str, str] = field(default_factory=dict)


def token_rules(public_key: Path) -> list[str]:
    """Front-end lines that read a bearer token's claims into variables, once per request."""
    return [
        "    http-request set-var(txn.bearer) http_auth_bearer",
        "    http-request set-var(txn.alg) var(txn.bearer),jwt_header_query('$.alg') if { var(txn.bearer) -m found }",
        "    http-request set-var(txn.aud) var(txn.bearer),jwt_payload_query('$.aud') if { var(txn.bearer) -m found }",
        "    http-request set-var(txn.email) var(txn.bearer),jwt_payload_query('$.email') "
        "if { var(txn.bearer) -m found }",
        "    http-request set-var(txn.exp) var(txn.bearer),jwt_payload_query('$.exp','int') "
        "if { var(txn.bearer) -m found }",
        "    http-request set-var(txn.now) date()",
        # 1 when the signature checks against the public key (HAProxy loads it once, at start)
        f"    http-request set-var(txn.signed) var(txn.bearer),jwt_verify(txn.alg,\"{public_key}\") "
        "if { var(txn.bearer) -m found }",
    ]


def access_rules(service: Service, errors: Path) -> list[str]:
    """Backend lines that answer as Cloud Run's front would for this service; none for a public one."""
    if service.public:
        return []
    forbidden, unauthorized = errors / "403.html", errors / "401.html"
    audiences = " ".join(service.audiences)
    emails = " ".join(service.invoker_emails)
    # a service no principal may invoke (the pull store's puller) refuses every token that checks
    invoker = f"if !{{ var(txn.email) -m str -- {emails} }}" if emails else ""
    return [
        f"    http-request return status 403 content-type text/html file {forbidden} "
        "if !{ var(txn.bearer) -m found }",
        f"    http-request return status 401 content-type text/html file {unauthorized} "
        "if !{ var(txn.signed) -m int 1 }",
        f"    http-request return status 401 content-type text/html file {unauthorized} "
        "if { var(txn.exp),sub(txn.now) -m int lt 0 }",
        f"    http-request return status 401 content-type text/html file {unauthorized} "
        f"if !{{ var(txn.aud) -m str {audiences} }}",
        f"    http-request return status 403 content-type text/html file {forbidden} {invoker}".rstrip(),
    ]


def write_error_pages(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "403.html").write_text(FORBIDDEN + "\n")
    (folder / "401.html").write_text(UNAUTHORIZED + "\n")
    return folder
