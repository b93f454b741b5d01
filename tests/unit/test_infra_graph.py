"""infra/: the functions are built only after the build account's grants have had time to
propagate. `terraform graph` of infra/ (offline, with the stand-in provider scripts/check-infra
builds) must have google_cloudfunctions2_function.this depend on terraform_data.build_grants_wait,
and the wait on each of the build account's grants; in pull mode (store_mode = "pull") the same holds for
store-inc-counter's Cloud Run service, through the build step that makes its image.

Skipped when terraform is not on the PATH, or when the stand-in provider or the provider schema it
serves is missing (scripts/check-infra builds the one into build/check-infra and reads the other
from ../shared/terraform/, or $SHARED_DIR/terraform/)."""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from visitkit.paths import INFRA_DIR as INFRA, ROOT

BUILD = ROOT / "build" / "check-infra"
SCHEMA_JSON = "providers-schema.google-6.50.0.archive-2.7.1.json"

FUNCTIONS = "google_cloudfunctions2_function.this"
WAIT = "terraform_data.build_grants_wait"
PULLER = "google_cloud_run_v2_service.store_puller"
PULLER_IMAGE = "terraform_data.puller_image"
BUILD_GRANTS = {
    "google_project_iam_member.this",  # logging.logWriter, and storage.objectAdmin on gcf-v2-sources
    "google_storage_bucket_iam_member.build_source_objects",  # storage.objectAdmin on our source bucket
    "google_artifact_registry_repository_iam_member.build_pushes_images",  # artifactregistry.writer
}


def offline_terraform_env(tmp_path):
    """The environment scripts/check-infra runs terraform in: dev_overrides to the stand-in provider,
    nothing downloaded, no checkpoint calls; a data directory of this test's own."""
    terraform = os.environ.get("TERRAFORM", "terraform")
    if shutil.which(terraform) is None:
        pytest.skip(f"{terraform} is not on the PATH")
    providers = {name: BUILD / "providers" / name for name in ("google", "archive")}
    if not all((path / f"terraform-provider-{name}").is_file() for name, path in providers.items()):
        pytest.skip("the stand-in provider is not built: run scripts/check-infra once")
    schema = Path(os.environ.get("SHARED_DIR") or ROOT.parent / "shared") / "terraform" / SCHEMA_JSON
    if not schema.is_file():
        pytest.skip(f"no provider schema at {schema} (set SHARED_DIR)")
    mirror = tmp_path / "empty-mirror"
    mirror.mkdir()
    config = tmp_path / "terraform.rc"
    config.write_text(
        "provider_installation {\n  dev_overrides {\n"
        + "".join(f'    "hashicorp/{name}" = "{path}"\n' for name, path in providers.items())
        + f'  }}\n  filesystem_mirror {{\n    path = "{mirror}"\n  }}\n}}\n')
    # The stand-in serves only the types the configuration uses, as in scripts/check-infra.
    types = sorted({m.group(2) for tf in [*INFRA.glob("*.tf"), *(INFRA / "loadgen").glob("*.tf")]
                    for m in re.finditer(r'^(resource|data) "([a-z0-9_]+)"', tf.read_text(), re.M)})
    env = {**os.environ, "CHECKPOINT_DISABLE": "1", "TF_IN_AUTOMATION": "1", "TF_INPUT": "0",
           "TF_CLI_CONFIG_FILE": str(config), "TF_DATA_DIR": str(tmp_path / "data"),
           "SCHEMA_PROVIDER_JSON": str(schema), "SCHEMA_PROVIDER_TYPES": " ".join(types)}
    return terraform, env


def dependencies(tmp_path):
    """{resource: the resources it depends on directly}, from `terraform graph` of infra/."""
    terraform, env = offline_terraform_env(tmp_path)
    result = subprocess.run([terraform, f"-chdir={INFRA}", "graph"], env=env, capture_output=True,
                            text=True, timeout=50)
    assert result.returncode == 0, result.stderr
    edges = {}
    for source, target in re.findall(r'^\s*"([^"]+)" -> "([^"]+)"', result.stdout, re.M):
        edges.setdefault(source, set()).add(target)
    assert edges, f"terraform graph printed no dependency:\n{result.stdout}"
    return edges


def reachable(edges, start):
    seen, todo = set(), [start]
    while todo:
        for target in edges.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


@pytest.mark.timeout(120)
def test_functions_wait_for_the_build_grants(tmp_path):
    edges = dependencies(tmp_path)
    # terraform graph reduces the graph transitively: the functions' own depends_on on the grants
    # may be folded into the path through the wait, so the wait is checked by reachability.
    assert WAIT in reachable(edges, FUNCTIONS), f"{FUNCTIONS} does not depend on {WAIT}"
    assert BUILD_GRANTS <= edges.get(WAIT, set()), f"{WAIT} does not depend on {BUILD_GRANTS - edges.get(WAIT, set())}"
    assert FUNCTIONS not in reachable(edges, WAIT)


@pytest.mark.timeout(120)
def test_the_puller_is_built_after_the_build_grants_and_started_with_its_grant(tmp_path):
    edges = dependencies(tmp_path)
    assert PULLER_IMAGE in edges.get(PULLER, set()), f"{PULLER} does not depend on {PULLER_IMAGE}"
    assert WAIT in reachable(edges, PULLER_IMAGE), f"{PULLER_IMAGE} does not depend on {WAIT}"
    assert "google_storage_bucket_object.functions" in reachable(edges, PULLER_IMAGE)
    assert "google_pubsub_subscription_iam_member.store_pulls" in reachable(edges, PULLER)
    assert PULLER not in reachable(edges, WAIT)
