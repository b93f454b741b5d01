"""Terraform in a rehearsal: the kit's own terraform command lines, run for real, offline.

Only Google's side is stood in for. The google and archive providers are the schema stand-in
(infra/tools/schema-provider) in its rehearsal mode: it plans and applies as a provider does, filling in
what Google computes in the shapes Google gives it, and really zips the functions. Terraform itself, the
configuration (infra/*.tf), its variables, the state, and the local-exec provisioners run as on a user's
machine; the one gcloud command they run (the puller's build, infra/pull.tf) meets the rehearsal's
recording gcloud (gcloud_stand_in.py), first on PATH.

Everything Terraform writes stays in the rehearsal's folder, never in infra/: `terraform init` writes
its lock file (.terraform.lock.hcl) in the working directory, whatever TF_DATA_DIR says, and the local
backend its state there too. So the commands run in a tree of the rehearsal's own (infra_dir(folder)):
FOLDER/tree/infra holds a link to each of infra/*.tf, FOLDER/tree/functions is a link to functions/
(the configuration reads ../functions), FOLDER/tree/build receives the zip (../build/functions.zip).
The kit's terraform_commands(...) take that folder as their infra_dir; nothing else of theirs changes.

The providers come from a filesystem mirror of the stand-in, at the versions infra/versions.tf pins: with
dev_overrides instead (as scripts/check-infra has them for validate and test), `terraform init` still
asks a registry for the providers, and fails offline.

The contract, for the kit's rehearsal target and the tests:
- environment(folder) -> {name: value}: what to add to os.environ for the kit's commands (it builds the
  stand-in once, under build/rehearsal/, and lays out the folder);
- infra_dir(folder) -> Path: the infra_dir to give terraform_commands(...) or GcpTarget(infra_dir=...);
- which(name): shutil.which on the rehearsal's PATH (the preflight's check of terraform and gcloud);
- applied_state(folder) -> `terraform show -json` of the applied state; deployed(state) -> what was
  deployed, per function (Deployed); builds(folder) -> the recording gcloud's calls;
- deployment(state, outputs, public_key, token_endpoint) -> the twin's cloudrun.Deployment.
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from visitkit.catalogue import CATALOGUE
from visitkit.errors import GcpError
from visitkit.paths import FUNCTIONS_DIR, INFRA_DIR, ROOT

BUILD_DIR = ROOT / "build" / "rehearsal"  # the stand-in's binary, the gcloud on PATH: shared by all rehearsals
BIN_DIR = BUILD_DIR / "bin"
STAND_IN_SOURCE = INFRA_DIR / "tools" / "schema-provider"
STAND_IN = BUILD_DIR / "schema-provider"
GCLOUD = Path(__file__).resolve().parent / "gcloud"  # the recording gcloud (gcloud_stand_in.py)
PROVIDERS = {"google": "6.50.0", "archive": "2.7.1"}  # as infra/versions.tf pins them
SCHEMA_FILE = "providers-schema.google-6.50.0.archive-2.7.1.json"
PROJECT_NUMBER = "123456789012"  # data.google_project.this.number in a rehearsal
GCLOUD_LOG_ENV = "VISITKIT_REHEARSAL_GCLOUD_LOG"
# The build grants' wait (build.tf) in a rehearsal: nothing propagates here, so 1 s rather than 60. A
# TF_VAR_ variable, the weakest: a settings file (-var-file) that names build_grants_wait_seconds wins.
GRANTS_WAIT_SECONDS = 1


def schema_json() -> Path:
    """The providers' schemas, in ../shared/terraform/ or $SHARED_DIR/terraform/ (as scripts/check-infra finds them)."""
    shared = Path(os.environ.get("SHARED_DIR") or ROOT.parent / "shared")
    path = shared / "terraform" / SCHEMA_FILE
    if not path.is_file():
        raise GcpError(f"rehearsal: the providers' schemas are not at {path}: set SHARED_DIR, or regenerate them "
                       "with network access (infra/README.md)")
    return path


def _go_env(name: str) -> str:
    return subprocess.run(["go", "env", name], check=True, capture_output=True, text=True).stdout.strip()


def build_stand_in() -> Path:
    """The stand-in's binary, built with `go build` when missing or older than its sources (one build at a
    time across processes)."""
    if shutil.which("go") is None:
        raise GcpError("rehearsal: 'go' was not found on PATH: it builds the stand-in provider "
                       "(infra/tools/schema-provider). Install Go 1.24 or later.")
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    with open(BUILD_DIR / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        sources = [p for p in STAND_IN_SOURCE.iterdir() if p.suffix == ".go" or p.name in ("go.mod", "go.sum")]
        newest = max(p.stat().st_mtime for p in sources)
        if not STAND_IN.exists() or STAND_IN.stat().st_mtime < newest:
            built = subprocess.run(["go", "build", "-o", str(STAND_IN), "."], cwd=STAND_IN_SOURCE,
                                   capture_output=True, text=True)
            if built.returncode != 0:
                raise GcpError(f"rehearsal: building the stand-in provider failed:\n{built.stderr}")
    return STAND_IN


def _prepare_bin() -> Path:
    BIN_DIR.mkdir(parents=True, exist_ok=True)
    link = BIN_DIR / "gcloud"
    if not (link.is_symlink() and link.resolve() == GCLOUD):
        link.unlink(missing_ok=True)
        link.symlink_to(GCLOUD)
    return BIN_DIR


def rehearsal_path() -> str:
    """PATH with the recording gcloud first."""
    return os.pathsep.join([str(_prepare_bin()), os.environ.get("PATH", "")])


def which(name: str) -> str | None:
    """shutil.which on the rehearsal's PATH: its gcloud is the recording one."""
    return shutil.which(name, path=rehearsal_path())


def infra_path(folder: str | Path) -> Path:
    """Where infra_dir(folder) puts the tree's infra/, made by nothing (a dry run names it)."""
    return Path(folder).resolve() / "tree" / "infra"


def infra_dir(folder: str | Path) -> Path:
    """The rehearsal's tree, FOLDER/tree: infra/ (a link to each .tf file of the kit's), functions (a link to the
    kit's) and build/ (the zip); its infra is what the kit's terraform commands run in (-chdir)."""
    infra = infra_path(folder)
    tree = infra.parent
    infra.mkdir(parents=True, exist_ok=True)
    (tree / "build").mkdir(exist_ok=True)
    functions = tree / "functions"
    if not functions.is_symlink():
        functions.symlink_to(FUNCTIONS_DIR)
    wanted = {p.name: p for p in INFRA_DIR.glob("*.tf")}
    for link in infra.glob("*.tf"):
        if link.is_symlink() and link.name not in wanted:
            link.unlink()  # a file the kit no longer has
    for name, target in wanted.items():
        link = infra / name
        if not link.is_symlink():
            link.symlink_to(target)
    return infra


def _platform() -> str:
    return f"{_go_env('GOOS')}_{_go_env('GOARCH')}"


def _mirror(folder: Path, binary: Path) -> Path:
    """A filesystem mirror (unpacked layout) serving the stand-in as hashicorp/google and hashicorp/archive."""
    mirror = folder / "mirror"
    platform = _platform()
    for name, version in PROVIDERS.items():
        directory = mirror / "registry.terraform.io" / "hashicorp" / name / version / platform
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / f"terraform-provider-{name}_v{version}"
        if not (target.is_symlink() and target.resolve() == binary.resolve()):
            target.unlink(missing_ok=True)
            target.symlink_to(binary)
    return mirror


def served_types(module: Path = INFRA_DIR) -> str:
    """The resource and data source types a root module's *.tf use, as check-infra lists them
    (SCHEMA_PROVIDER_TYPES)."""
    types: set[str] = set()
    for path in module.glob("*.tf"):
        types.update(re.findall(r'^(?:resource|data) "([a-z0-9_]+)"', path.read_text(), re.MULTILINE))
    return " ".join(sorted(types))


def gcloud_log(folder: str | Path) -> Path:
    return Path(folder).resolve() / "gcloud.jsonl"


def environment(folder: str | Path, grants_wait_seconds: int | None = GRANTS_WAIT_SECONDS) -> dict[str, str]:
    """What to add to the environment of the kit's terraform commands (their `-chdir` being infra_dir(folder)):
    the stand-in's mirror, Terraform's data folder, the rehearsal mode, the recording gcloud first on PATH."""
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    mirror = _mirror(folder, build_stand_in())
    infra_dir(folder)
    config = folder / "terraform.rc"
    includes = ", ".join(f'"registry.terraform.io/hashicorp/{name}"' for name in PROVIDERS)
    config.write_text(
        "# The rehearsal's providers: the schema stand-in, from a mirror of its own; nothing else is installed.\n"
        "provider_installation {\n"
        "  filesystem_mirror {\n"
        f"    path    = {json.dumps(str(mirror))}\n"
        f"    include = [{includes}]\n"
        "  }\n"
        "}\n")
    env = {
        "TF_CLI_CONFIG_FILE": str(config),
        "TF_DATA_DIR": str(folder / "data"),
        "TF_IN_AUTOMATION": "1",
        "TF_INPUT": "0",
        "CHECKPOINT_DISABLE": "1",
        "SCHEMA_PROVIDER_JSON": str(schema_json()),
        "SCHEMA_PROVIDER_TYPES": served_types(),
        "SCHEMA_PROVIDER_REHEARSAL": "1",
        "SCHEMA_PROVIDER_PROJECT_NUMBER": PROJECT_NUMBER,
        GCLOUD_LOG_ENV: str(gcloud_log(folder)),
        "PATH": rehearsal_path(),
    }
    if grants_wait_seconds is not None:
        env["TF_VAR_build_grants_wait_seconds"] = str(grants_wait_seconds)
    return env


def applied_state(folder: str | Path, module: Path | None = None, env: Mapping[str, str] | None = None
                  ) -> dict[str, Any]:
    """The rehearsal's state of a root module (default infra/, in infra_dir(folder), with environment(folder)),
    as `terraform show -json` gives it ({} values before any apply)."""
    folder = Path(folder).resolve()
    module = module or infra_dir(folder)
    shown = subprocess.run(["terraform", f"-chdir={module}", "show", "-json"],
                           env={**os.environ, **(env or environment(folder))}, capture_output=True, text=True)
    if shown.returncode != 0:
        raise GcpError(f"rehearsal: terraform show -json ({module.name}) failed:\n{shown.stderr}")
    state: dict[str, Any] = json.loads(shown.stdout)
    return state


def builds(folder: str | Path) -> list[dict[str, Any]]:
    """The recording gcloud's calls in this rehearsal, in order."""
    log = gcloud_log(folder)
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


# --- what was deployed ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Function:
    """One function as applied: a google_cloudfunctions2_function, or in pull mode the store's Cloud Run service."""
    name: str  # logical (functions/catalogue.json)
    service: str  # the Cloud Run service's short name
    kind: str  # "function", or "service" (google_cloud_run_v2_service.store_puller)
    max_instances: int
    min_instances: int
    concurrency: int
    cpu: str
    memory: str
    timeout_seconds: int
    environment: Mapping[str, str]
    url: str  # the function's cloudfunctions.net URL; the service's own URL for a Cloud Run service
    uri: str  # its Cloud Run service's run.app URL
    invokers: tuple[str, ...]  # members with roles/run.invoker on its service


@dataclass(frozen=True)
class PushConfig:
    """The push subscription's push_config."""
    endpoint: str
    service_account_email: str
    audience: str


@dataclass(frozen=True)
class Deployed:
    project: str
    region: str
    functions: Mapping[str, Function]  # by logical name
    push: PushConfig | None  # None for a pull subscription


def resources(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The state's resources (`terraform show -json`'s root module and any child modules)."""
    found: list[dict[str, Any]] = []
    modules = [state.get("values", {}).get("root_module", {})]
    while modules:
        module = modules.pop()
        found += module.get("resources", [])
        modules += module.get("child_modules", [])
    return found


def _first(blocks: Any) -> dict[str, Any]:
    return blocks[0] if isinstance(blocks, list) and blocks else {}


def _seconds(duration: str | None) -> int:
    return int(float(duration.rstrip("s"))) if duration else 0


def deployed(state: Mapping[str, Any]) -> Deployed:
    """Per function (logical names from functions/catalogue.json): limits, environment, URLs, run.invoker members;
    and the push subscription's push_config."""
    by_service = {function.service: name for name, function in CATALOGUE.items()}
    invokers: dict[str, list[str]] = {}
    functions: dict[str, Function] = {}
    push: PushConfig | None = None
    project = region = ""
    for resource in resources(state):
        values = resource.get("values") or {}
        kind = resource["type"]
        if resource.get("mode") != "managed":
            continue
        if kind == "google_cloud_run_v2_service_iam_member" and values.get("role") == "roles/run.invoker":
            invokers.setdefault(values["name"].rsplit("/", 1)[-1], []).append(values["member"])
        elif kind == "google_cloudfunctions2_function" and resource["name"] == "this":
            service = _first(values.get("service_config"))
            name = resource.get("index") or by_service[values["name"]]
            functions[name] = Function(
                name=name, service=service.get("service", values["name"]).rsplit("/", 1)[-1], kind="function",
                max_instances=int(service.get("max_instance_count") or 0),
                min_instances=int(service.get("min_instance_count") or 0),
                concurrency=int(service.get("max_instance_request_concurrency") or 0),
                cpu=str(service.get("available_cpu") or ""), memory=str(service.get("available_memory") or ""),
                timeout_seconds=int(service.get("timeout_seconds") or 0),
                environment=dict(service.get("environment_variables") or {}),
                url=values.get("url") or "", uri=service.get("uri") or "", invokers=())
            project, region = values.get("project") or project, values.get("location") or region
        elif kind == "google_cloud_run_v2_service" and resource["name"] == "store_puller":
            template = _first(values.get("template"))
            scaling = _first(template.get("scaling"))
            container = _first(template.get("containers"))
            limits = _first(container.get("resources")).get("limits") or {}
            name = by_service[values["name"]]
            functions[name] = Function(
                name=name, service=values["name"], kind="service",
                max_instances=int(scaling.get("max_instance_count") or 0),
                min_instances=int(scaling.get("min_instance_count") or 0),
                concurrency=int(template.get("max_instance_request_concurrency") or 0),
                cpu=str(limits.get("cpu") or ""), memory=str(limits.get("memory") or ""),
                timeout_seconds=_seconds(template.get("timeout")),
                environment={env["name"]: env.get("value") or "" for env in container.get("env") or []},
                url=values.get("uri") or "", uri=values.get("uri") or "", invokers=())
        elif kind == "google_pubsub_subscription" and resource["name"] == "store_inc_counter":
            config = _first(values.get("push_config"))
            if config:
                token = _first(config.get("oidc_token"))
                push = PushConfig(endpoint=config.get("push_endpoint") or "",
                                  service_account_email=token.get("service_account_email") or "",
                                  audience=token.get("audience") or "")
    functions = {name: replace(f, invokers=tuple(sorted(invokers.get(f.service, [])))) for name, f in functions.items()}
    return Deployed(project=project, region=region, functions=functions, push=push)


def deployment(state: Mapping[str, Any], outputs: Mapping[str, Any], public_key: Path,
               token_endpoint: str | None = None) -> Any:
    """The twin's cloudrun.Deployment of an applied state and its outputs (parse_outputs)."""
    from visitkit.twin import cloudrun

    applied = deployed(state)
    urls = outputs.get("function_urls") or {}
    services = {name: cloudrun.Service(max_instances=f.max_instances, concurrency=f.concurrency,
                                       timeout_seconds=f.timeout_seconds, environment=f.environment,
                                       url=urls.get(name, f.url), uri=f.uri, invokers=f.invokers)
                for name, f in applied.functions.items()}
    push = applied.push
    return cloudrun.Deployment(
        project=outputs.get("project_id") or applied.project, topic=outputs["topic_name"],
        subscription=outputs["subscription_name"], dead_letter_topic=outputs.get("dead_letter_topic_name"),
        services=services, public_key=public_key, push_email=push.service_account_email if push else None,
        push_audience=push.audience if push else None, token_endpoint=token_endpoint)
