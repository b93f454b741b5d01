"""The rehearsal's gcloud: records each call, and answers `gcloud builds submit` as gcloud and Cloud Build would.

In a rehearsal (visitkit.rehearsal.terraform), the `gcloud` first on PATH is this stand-in
(scripts/visitkit/rehearsal/gcloud execs it). Terraform's local-exec provisioners run it for real:
infra/pull.tf's terraform_data.puller_image builds the puller's image with `gcloud builds submit`.
Each call is appended as one JSON line to the file named by VISITKIT_REHEARSAL_GCLOUD_LOG (argv, the
build it describes, the exit code and error), and the call fails, with gcloud's own error text, where
real gcloud would fail: nothing is built, nothing is sent.

What it designs against, read in gcloud 528.0.0's source (lib/surface/builds/submit.py,
lib/googlecloudsdk/command_lib/builds/{flags,submit_util,staging_bucket_util}.py,
lib/googlecloudsdk/api_lib/cloudbuild/config.py):
- The flags `builds submit` takes (submit.py _CommonArgs, flags.py) and gcloud's global ones; any other is
  "unrecognized arguments". SOURCE and --no-source exclude each other; so do --config, --pack and --tag
  ("At most one of --config | --pack | --tag can be specified"). --config defaults to cloudbuild.yaml.
- --pack is an ArgDict of the keys image, builder and env only ("valid keys are [builder, env, image]"),
  so it carries ONE env, which gcloud passes to `pack build --env` whole: pack takes one VAR=VALUE per
  --env (buildpacks/pack internal/commands/build.go, StringArrayVarP), so "A=1,B=2" sets A to "1,B=2".
  The image is required and must be in the *gcr.io* or *pkg.dev* namespace (builds/check_tag).
  The build is a gcr.io/k8s-skaffold/pack step `pack build IMAGE --network cloudbuild [--env ENV]
  [--builder B]`, after `pack config default-builder gcr.io/buildpacks/builder:latest` when no builder is
  given, with IMAGE in images (submit_util.py _SetBuildSteps).
- --config: a JSON or YAML Build; unknown fields are "unused"; a config may not give a source and must
  list a step (config.py FinalizeCloudbuildConfig).
- --default-buckets-behavior: legacy-bucket, regional-user-owned-bucket (or
  default-logs-bucket-behavior-unspecified).
- The source: without --gcs-source-staging-dir, gcloud copies it into gs://PROJECT_cloudbuild/source, or
  gs://PROJECT_REGION_cloudbuild/source with regional-user-owned-bucket and a region other than global
  (submit_util.py SetSource, staging_bucket_util.py: ':' and '.' of the project become '_', "google"
  "elgoog"), creating that bucket as the caller if missing; the build then fetches the copy.
- --gcs-log-dir sets the build's logsBucket; --region defaults to builds/region, else global; the
  command waits for the build and fails when it does not succeed (submit_util.py Build).

What Cloud Build then does with the build, modelled here (Google's documents, not gcloud's source):
- a build run as a service account of ours must log to Cloud Logging (CLOUD_LOGGING_ONLY or NONE), to a
  bucket of ours (logsBucket) or to a regional user-owned bucket, else the API refuses it
  (https://cloud.google.com/build/docs/securing-builds/configure-user-specified-service-accounts);
- the build runs as that account: it must read the staged source; a logs bucket of ours needs it to be
  Storage Admin there (https://cloud.google.com/build/docs/securing-builds/store-view-build-logs), a
  regional user-owned one to "create and write to GCS buckets in the build project" (Cloud Build's
  BuildOptions.DefaultLogsBucketBehavior); Cloud Logging needs Logs Writer; pushing the image, Artifact
  Registry Writer on its repository;
- the Python buildpack takes GOOGLE_PYTHON_VERSION, and a builder has only some Pythons: google-22
  3.10 to 3.13, google-24 3.13 and later, the latest tag now google-24
  (https://cloud.google.com/docs/buildpacks/builders, https://cloud.google.com/docs/buildpacks/python).
What the kit's build account, visitkit-build, may do is the kit's own infra/iam.tf and build.tf (GRANTS).
"""
from __future__ import annotations

import datetime
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

LOG_ENV = "VISITKIT_REHEARSAL_GCLOUD_LOG"
COMMAND = "gcloud.builds.submit"

# --- the command line ----------------------------------------------------------------------------

# builds submit's own flags (submit.py _CommonArgs and flags.py), by whether they take a value
SUBMIT_VALUE_FLAGS = {
    "--region", "--service-account", "--gcs-source-staging-dir", "--gcs-log-dir", "--timeout",
    "--polling-interval", "--machine-type", "--disk-size", "--substitutions", "--default-buckets-behavior",
    "--worker-pool", "--ignore-file", "--tag", "--config", "--pack", "--git-source-dir",
    "--git-source-revision", "--dir", "--revision",
}
SUBMIT_BOOL_FLAGS = {"--no-source", "--no-cache", "--async", "--suppress-logs"}
# gcloud's global flags
GLOBAL_VALUE_FLAGS = {
    "--project", "--account", "--billing-project", "--configuration", "--flags-file", "--flatten", "--format",
    "--impersonate-service-account", "--trace-token", "--verbosity",
}
GLOBAL_BOOL_FLAGS = {"--quiet", "--log-http", "--user-output-enabled", "--no-user-output-enabled", "--help"}
SHORT_FLAGS = {"-t": "--tag", "-q": "--quiet", "-h": "--help"}
BUCKET_BEHAVIORS = {
    "default-logs-bucket-behavior-unspecified": "DEFAULT_LOGS_BUCKET_BEHAVIOR_UNSPECIFIED",
    "legacy-bucket": "LEGACY_BUCKET",
    "regional-user-owned-bucket": "REGIONAL_USER_OWNED_BUCKET",
}
PACK_KEYS = ("builder", "env", "image")  # flags.py: ArgDict(spec={'image': str, 'builder': str, 'env': str})
DEFAULT_BUILDER = "gcr.io/buildpacks/builder:latest"
PACK_IMAGE = "gcr.io/k8s-skaffold/pack"

# The Build message's fields a config may give (cloudbuild v1 messages), and its options' and steps'.
BUILD_FIELDS = {
    "approval", "artifacts", "availableSecrets", "buildTriggerId", "createTime", "dependencies", "failureInfo",
    "finishTime", "gitConfig", "id", "images", "logUrl", "logsBucket", "name", "options", "projectId", "queueTtl",
    "results", "secrets", "serviceAccount", "source", "sourceProvenance", "startTime", "status", "statusDetail",
    "steps", "substitutions", "tags", "timeout", "timing", "warnings",
}
OPTION_FIELDS = {
    "anthosCluster", "automapSubstitutions", "cluster", "defaultLogsBucketBehavior", "diskSizeGb", "dockerDaemon",
    "dynamicSubstitutions", "enableStructuredLogging", "env", "logStreamingOption", "logging", "machineType", "pool",
    "pubsubTopic", "requestedVerifyOption", "secretEnv", "sourceProvenanceHash", "substitutionOption", "volumes",
    "workerPool",
}
STEP_FIELDS = {
    "allowExitCodes", "allowFailure", "args", "automapSubstitutions", "dir", "entrypoint", "env", "exitCode", "id",
    "name", "pullTiming", "script", "secretEnv", "status", "timeout", "timing", "volumes", "waitFor",
}
LOGGING_MODES = {"LOGGING_UNSPECIFIED", "LEGACY", "GCS_ONLY", "STACKDRIVER_ONLY", "CLOUD_LOGGING_ONLY", "NONE"}

# The Pythons each builder has (https://cloud.google.com/docs/buildpacks/builders); the latest tag is
# google-24's in Google's newest version of that page.
BUILDER_PYTHONS = {
    "gcr.io/buildpacks/builder:google-22": ("3.10", "3.11", "3.12", "3.13"),
    "gcr.io/buildpacks/builder:google-24": ("3.13", "3.14"),
    "gcr.io/buildpacks/builder:latest": ("3.13", "3.14"),
    "gcr.io/buildpacks/builder": ("3.13", "3.14"),
}


class GcloudError(Exception):
    """A failure as gcloud reports it: `ERROR: (gcloud.builds.submit) MESSAGE`, exit status `code`."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.message, self.code = message, code


@dataclass
class CommandLine:
    words: list[str] = field(default_factory=list)  # the command: ["builds", "submit"]
    values: dict[str, str] = field(default_factory=dict)
    switches: set[str] = field(default_factory=set)
    positionals: list[str] = field(default_factory=list)


def parse(argv: Sequence[str]) -> CommandLine:
    """gcloud's command line: the command's words, then its flags (--flag=value or --flag value) and SOURCE."""
    line = CommandLine()
    tokens = list(argv)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if token.startswith("-") and token != "-":
            name, has_value, value = token.partition("=")
            name = SHORT_FLAGS.get(name, name)
            value_flags = GLOBAL_VALUE_FLAGS | (SUBMIT_VALUE_FLAGS if line.words == ["builds", "submit"] else set())
            bool_flags = GLOBAL_BOOL_FLAGS | (SUBMIT_BOOL_FLAGS if line.words == ["builds", "submit"] else set())
            if name in value_flags:
                if not has_value:
                    if i >= len(tokens):
                        raise GcloudError(f"argument {name}: expected one argument", 2)
                    value = tokens[i]
                    i += 1
                if name == "--pack" and "--pack" in line.values:  # action='append': gcloud uses the first
                    continue
                line.values[name] = value
            elif name in bool_flags and not has_value:
                line.switches.add(name)
            else:
                raise GcloudError(f"unrecognized arguments: {token} ", 2)
        elif len(line.words) < 2:
            line.words.append(token)
        else:
            line.positionals.append(token)
    return line


# --- the build, as gcloud makes it --------------------------------------------------------------

@dataclass
class Build:
    """The build gcloud would submit, and what it would copy first."""
    project: str
    region: str
    source: str | None
    staging_dir: str  # gs://BUCKET/DIR gcloud copies the source into
    staging_is_default: bool
    steps: list[dict[str, Any]]
    images: list[str]
    service_account: str | None = None
    logs_bucket: str | None = None
    logging: str | None = None
    default_logs_bucket_behavior: str | None = None
    config: dict[str, Any] | None = None  # the --config file's content, as read

    @property
    def pack(self) -> dict[str, Any]:
        """The pack build's image, builder and environment, as the builder receives them."""
        builder: str | None = None
        for step in self.steps:
            args = [str(arg) for arg in step.get("args", [])]
            if args[:2] == ["config", "default-builder"] and len(args) > 2:
                builder = args[2]
        for step in self.steps:
            args = [str(arg) for arg in step.get("args", [])]
            if step.get("entrypoint") != "pack" or args[:1] != ["build"]:
                continue
            env: dict[str, str] = {}
            i = 2
            while i < len(args):
                if args[i] in ("--env", "-e") and i + 1 < len(args):
                    key, _, value = args[i + 1].partition("=")  # pack: one VAR=VALUE per --env
                    env[key] = value
                    i += 1
                elif args[i] in ("--builder", "-B") and i + 1 < len(args):
                    builder = args[i + 1]
                    i += 1
                i += 1
            return {"image": args[1] if len(args) > 1 else None, "builder": builder or DEFAULT_BUILDER, "env": env}
        return {}

    @property
    def python_version(self) -> str | None:
        return self.pack.get("env", {}).get("GOOGLE_PYTHON_VERSION")

    def record(self) -> dict[str, Any]:
        return {**asdict(self), "pack": self.pack, "python_version": self.python_version}


def gs_path(url: str, flag: str) -> tuple[str, str]:
    """(bucket, object) of gs://BUCKET/OBJECT, refused as gcloud's resource parser refuses it."""
    if not url.startswith("gs://"):
        raise GcloudError("value for field [bucket] in collection [storage.objects] is required but was not provided")
    bucket, _, name = url[len("gs://"):].partition("/")
    if not bucket:
        raise GcloudError(f"Invalid value for [{flag}]: {url}")
    return bucket, name


def staging_bucket(project: str, region: str, regional: bool) -> str:
    """staging_bucket_util.py's default bucket name."""
    safe = project.replace(":", "_").replace(".", "_").replace("google", "elgoog")
    return f"{safe}_{region}_cloudbuild" if regional else f"{safe}_cloudbuild"


def load_config(path: str) -> dict[str, Any]:
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise GcloudError(f"Unable to read file [{path}]: {error}") from error
    try:
        data = json.loads(text)
    except ValueError:
        try:
            import yaml
        except ImportError as error:
            raise GcloudError(f"interpreting {path} as build config: not JSON (and no YAML parser here)") from error
        data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise GcloudError(f"interpreting {path} as build config: not a map")
    config: dict[str, Any] = {camel(key): value for key, value in data.items()}
    unused = [f".{key}" for key in config if key not in BUILD_FIELDS]
    options = {camel(key): value for key, value in (config.get("options") or {}).items()}
    unused += [f".options.{key}" for key in options if key not in OPTION_FIELDS]
    if "logging" in options and options["logging"] not in LOGGING_MODES:
        unused.append(".options.logging")
    steps = [{camel(key): value for key, value in step.items()} for step in config.get("steps") or []]
    unused += [f".steps[{i}].{key}" for i, step in enumerate(steps) for key in step if key not in STEP_FIELDS]
    if unused:
        raise GcloudError(f"interpreting {path} as build config: {unused[0]}: unused")
    if config.get("source"):
        raise GcloudError(f"validating {path} as build config: config cannot specify source")
    if not steps:
        raise GcloudError(f"validating {path} as build config: config must list at least one step")
    return {**config, "options": options, "steps": steps}


def camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def build_of(line: CommandLine, default_project: str | None = None) -> Build:
    """The build `gcloud builds submit` makes of its command line (submit.py Run, submit_util.py)."""
    values, switches = line.values, line.switches
    if len(line.positionals) > 1:
        raise GcloudError(f"unrecognized arguments: {' '.join(line.positionals[1:])} ", 2)
    source = line.positionals[0] if line.positionals else None
    if source is not None and "--no-source" in switches:
        raise GcloudError("argument --no-source: At most one of --no-source | SOURCE can be specified.", 2)
    chosen = [flag for flag in values if flag in ("--config", "--pack", "--tag")]  # in the order given
    if len(chosen) > 1:  # argparse names the second one it meets
        raise GcloudError(f"argument {chosen[1]}: At most one of --config | --pack | --tag can be specified.", 2)
    behavior = None
    if "--default-buckets-behavior" in values:
        choice = values["--default-buckets-behavior"]
        if choice not in BUCKET_BEHAVIORS:
            raise GcloudError(f"argument --default-buckets-behavior: Invalid choice: '{choice}'.\n\nValid choices are "
                              f"[{', '.join(BUCKET_BEHAVIORS)}].", 2)
        behavior = BUCKET_BEHAVIORS[choice]
    project = values.get("--project") or default_project
    if not project:
        raise GcloudError("The required property [project] is not currently set.")
    region = values.get("--region") or "global"

    config: dict[str, Any] | None = None
    images: list[str] = []
    if "--pack" in values:
        pack = pack_dict(values["--pack"])
        image = pack.get("image")
        if not image:
            raise GcloudError("Invalid value for [--pack]: Image value must not be empty.")
        if not any(registry in image for registry in ("gcr.io", "pkg.dev")):
            raise GcloudError("Invalid value for [--pack]: Image value must be in the *gcr.io* or *pkg.dev* namespace")
        args = ["build", image, "--network", "cloudbuild"]
        if pack.get("env") is not None:
            args += ["--env", pack["env"]]
        steps: list[dict[str, Any]] = []
        if pack.get("builder") is not None:
            args += ["--builder", pack["builder"]]
        else:
            steps.append({"name": PACK_IMAGE, "entrypoint": "pack", "args": ["config", "default-builder",
                                                                             DEFAULT_BUILDER]})
        steps.append({"name": PACK_IMAGE, "entrypoint": "pack", "args": args})
        images = [image]
    elif "--tag" in values:
        tag = values["--tag"]
        if not any(registry in tag for registry in ("gcr.io", "pkg.dev")):
            raise GcloudError("Invalid value for [--tag]: Tag value must be in the *gcr.io* or *pkg.dev* namespace.")
        steps = [{"name": "gcr.io/cloud-builders/docker", "args": ["build", "--network", "cloudbuild", "--no-cache",
                                                                    "-t", tag, "."]}]
        images = [tag]
    else:
        config = load_config(values.get("--config", "cloudbuild.yaml"))
        steps = config["steps"]
        images = list(config.get("images") or [])

    options = (config or {}).get("options") or {}
    regional = (behavior or options.get("defaultLogsBucketBehavior")) == "REGIONAL_USER_OWNED_BUCKET"
    if "--gcs-source-staging-dir" in values:
        staging_dir, default_staging = values["--gcs-source-staging-dir"], False
        gs_path(staging_dir, "--gcs-source-staging-dir")
    else:
        bucket = staging_bucket(project, region, regional and region != "global")
        staging_dir, default_staging = f"gs://{bucket}/source", True
    if source is None and "--no-source" not in switches:
        source = "."
    if source is not None and source.startswith("gs://"):
        gs_path(source, "SOURCE")
    logs_bucket = (config or {}).get("logsBucket")
    if "--gcs-log-dir" in values:
        bucket, name = gs_path(values["--gcs-log-dir"], "--gcs-log-dir")
        logs_bucket = f"gs://{bucket}/{name}" if name else f"gs://{bucket}"
    return Build(project=project, region=region, source=None if "--no-source" in switches else source,
                 staging_dir=staging_dir, staging_is_default=default_staging, steps=steps, images=images,
                 service_account=values.get("--service-account") or (config or {}).get("serviceAccount"),
                 logs_bucket=logs_bucket, logging=options.get("logging"),
                 default_logs_bucket_behavior=behavior or options.get("defaultLogsBucketBehavior"), config=config)


def pack_dict(text: str) -> dict[str, str]:
    """--pack as gcloud's ArgDict reads it: KEY=VALUE pairs split on ',' (or on the delimiter a leading
    ^D^ names), each split on its first '='."""
    delimiter = ","
    match = re.match(r"\^(.+?)\^", text)
    if match:
        delimiter, text = match.group(1), text[match.end():]
    result: dict[str, str] = {}
    for item in text.split(delimiter) if text else []:
        key, _, value = item.partition("=")
        if key not in PACK_KEYS:
            raise GcloudError(f"argument --pack: valid keys are [{', '.join(PACK_KEYS)}]; received: {key}", 2)
        result[key] = value
    return result


# --- what Cloud Build does with it --------------------------------------------------------------

@dataclass(frozen=True)
class Grants:
    """What a build's service account may do: the buckets it may read and write objects in (names or
    prefixes ending in '*'), the buckets it is Storage Admin of, whether it writes to Cloud Logging and
    may create buckets, and the Artifact Registry repositories (REGION-docker.pkg.dev/PROJECT/REPO) it
    pushes to."""
    object_buckets: tuple[str, ...] = ()
    admin_buckets: tuple[str, ...] = ()
    logs_writer: bool = False
    creates_buckets: bool = False
    repositories: tuple[str, ...] = ()

    def objects(self, bucket: str) -> bool:
        return any(bucket == b or (b.endswith("*") and bucket.startswith(b[:-1])) for b in self.object_buckets)


def kit_grants(project: str, region: str) -> dict[str, Grants]:
    """The kit's build account and what infra/iam.tf and build.tf grant it: Storage Object Admin on the source
    bucket (build_source_objects) and on gcf-v2-sources-* (build-gcf-sources), Logs Writer (build-writes-logs),
    Artifact Registry Writer on visitkit-functions (build_pushes_images); no bucket creation, no Storage Admin."""
    account = f"projects/{project}/serviceAccounts/visitkit-build@{project}.iam.gserviceaccount.com"
    return {account: Grants(object_buckets=(f"{project}-visitkit-source", "gcf-v2-sources-*"), logs_writer=True,
                            repositories=(f"{region}-docker.pkg.dev/{project}/visitkit-functions",))}


def outcome(build: Build, grants: Mapping[str, Grants], project_number: str) -> list[str]:
    """Why Cloud Build would refuse or fail `build` (nothing when it would succeed)."""
    problems: list[str] = []
    account = build.service_account
    if account is None:
        return problems  # the project's default build account: not the kit's case, not modelled
    if not re.fullmatch(r"projects/[^/]+/serviceAccounts/[^/]+", account):
        return [f"INVALID_ARGUMENT: the build's service account must be projects/PROJECT/serviceAccounts/ACCOUNT, "
                f"not {account}"]
    logs_ok = (build.logs_bucket or build.default_logs_bucket_behavior == "REGIONAL_USER_OWNED_BUCKET"
               or build.logging in ("CLOUD_LOGGING_ONLY", "NONE"))
    if not logs_ok:
        return ["INVALID_ARGUMENT: a build with a service account of yours must specify a logs bucket, use the "
                "REGIONAL_USER_OWNED_BUCKET default logs bucket behavior, or use the CLOUD_LOGGING_ONLY or NONE "
                "logging option"]
    granted = grants.get(account, Grants())
    email = account.rsplit("/", 1)[1]
    if build.source is not None:
        bucket, _ = gs_path(build.staging_dir, "--gcs-source-staging-dir")
        if not granted.objects(bucket):
            problems.append(f"the build cannot fetch its source: {email} may not read gs://{bucket}, where gcloud "
                            f"staged it (storage.objects.get denied)")
    if build.logs_bucket:
        bucket, _ = gs_path(build.logs_bucket, "--gcs-log-dir")
        if bucket not in granted.admin_buckets:
            problems.append(f"the build cannot write its logs to {build.logs_bucket}: {email} is not Storage Admin "
                            f"of gs://{bucket}")
    elif build.default_logs_bucket_behavior == "REGIONAL_USER_OWNED_BUCKET" and build.logging not in (
            "CLOUD_LOGGING_ONLY", "NONE"):
        logs = f"gs://{project_number}-{build.region}-cloudbuild-logs"
        if not granted.creates_buckets:
            problems.append(f"the build cannot create and write its regional logs bucket {logs}: {email} may not "
                            f"create buckets in the project")
    if build.logging in ("CLOUD_LOGGING_ONLY", "STACKDRIVER_ONLY") and not granted.logs_writer:
        problems.append(f"the build cannot write its logs to Cloud Logging: {email} is not a Logs Writer")
    for image in build.images:
        if not any(image.startswith(repository + "/") for repository in granted.repositories):
            problems.append(f"the build cannot push {image}: {email} may not write to its repository")
    pack = build.pack
    if pack:
        for key, value in pack["env"].items():
            if re.search(r",[A-Z_][A-Z0-9_]*=", value):
                problems.append(f"pack sets {key} to {value!r}: pack takes one VAR=VALUE per --env, so a "
                                f"comma-separated list becomes one value")
        version = build.python_version
        pythons = BUILDER_PYTHONS.get(pack["builder"])
        if version and pythons is not None and not any(version == v or version.startswith(v + ".")
                                                       for v in pythons):
            problems.append(f"the builder {pack['builder']} has no Python {version} (it has "
                            f"{', '.join(pythons)})")
    return problems


# --- the command ---------------------------------------------------------------------------------

def record(entry: Mapping[str, Any], log: str | None) -> None:
    if not log:
        return
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as out:
        out.write(json.dumps(entry, sort_keys=True) + "\n")


def run(argv: Sequence[str], environ: Mapping[str, str] | None = None, stdout: Any = None,
        stderr: Any = None) -> int:
    """One gcloud call: checked, recorded, answered; returns its exit status."""
    environ = os.environ if environ is None else environ
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    entry: dict[str, Any] = {"argv": ["gcloud", *argv], "cwd": os.getcwd(),
                             "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}
    words = [token for token in argv if not token.startswith("-")][:2]
    command = COMMAND if words == ["builds", "submit"] else "gcloud"
    code = 0
    try:
        if command != COMMAND:
            raise GcloudError("the rehearsal's gcloud stands in for `gcloud builds submit` only; it was called as "
                              f"`gcloud {' '.join(argv)}`")
        line = parse(argv)
        build = build_of(line, environ.get("CLOUDSDK_CORE_PROJECT"))
        entry["build"] = build.record()
        number = environ.get("SCHEMA_PROVIDER_PROJECT_NUMBER", "123456789012")
        problems = outcome(build, kit_grants(build.project, build.region), number)
        entry["problems"] = problems
        if problems:
            build_id = "rehearsal-build"
            if problems[0].startswith("INVALID_ARGUMENT"):
                raise GcloudError(problems[0])
            print("BUILD FAILURE: " + "; ".join(problems), file=stderr)
            raise GcloudError(f'build {build_id} completed with status "FAILURE"')
        if not build.python_version and build.pack:
            print(f"WARNING: (rehearsal) no GOOGLE_PYTHON_VERSION: the builder {build.pack['builder']} picks its "
                  "latest Python", file=stderr)
        print(f"Created [https://cloudbuild.googleapis.com/v1/projects/{build.project}/locations/{build.region}/"
              "builds/rehearsal-build].", file=stderr)
        print(f"(rehearsal) recorded, nothing built: {', '.join(build.images) or 'no image'}", file=stderr)
        print("ID               STATUS\nrehearsal-build  SUCCESS", file=stdout)
    except GcloudError as error:
        print(f"ERROR: ({command}) {error.message}", file=stderr)
        entry["error"] = error.message
        code = error.code
    entry["exit"] = code
    record(entry, environ.get(LOG_ENV))
    return code


def main() -> None:
    sys.exit(run(sys.argv[1:]))


if __name__ == "__main__":
    main()
