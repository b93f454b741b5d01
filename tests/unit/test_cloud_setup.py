"""`make setup-cloud` installs requirements-cloud.txt and the kit, not the local stack's packages (a
dry run without them: integration/test_cloud_only_dry_run.py). The kit's own install requirements are
pyproject.toml's [project] dependencies, which requirements-cloud.txt pins: neither may name one."""
import re
import tomllib

from visitkit.paths import ROOT

LOCAL_ONLY = {"functions-framework", "google-cloud-pubsub", "selenium", "schemathesis", "pytest"}


def name_of(requirement):
    """A requirement's project name, normalized as pip compares them (PEP 503): 'Functions_Framework>=3' ->
    'functions-framework'."""
    return re.sub(r"[-_.]+", "-", re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)[1]).lower()


def cloud_requirements():
    lines = (ROOT / "requirements-cloud.txt").read_text().splitlines()
    return {name_of(line) for line in lines if line.strip() and not line.lstrip().startswith(("#", "-"))}


def project_dependencies():
    return {name_of(requirement) for requirement in
            tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]}


def test_a_requirement_is_read_by_its_normalized_name():
    assert [name_of(r) for r in ("Functions_Framework>=3.0", "google-cloud-pubsub==2.1", "pytest ; python_version>'3'",
                                 "tqdm[notebook]", "zope.interface")] == [
        "functions-framework", "google-cloud-pubsub", "pytest", "tqdm", "zope-interface"]


def test_requirements_cloud_holds_none_of_the_local_stacks_packages():
    cloud = cloud_requirements()
    assert cloud and not cloud & LOCAL_ONLY, sorted(cloud & LOCAL_ONLY)
    assert "-r requirements-cloud.txt" in (ROOT / "requirements-dev.txt").read_text()


def test_the_kits_install_requirements_hold_none_of_the_local_stacks_packages():
    """`pip install .` (what setup-cloud does for the kit) installs [project] dependencies: the local stack's
    packages belong in the "local" extra."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    dependencies = project_dependencies()
    assert dependencies and not dependencies & LOCAL_ONLY, sorted(dependencies & LOCAL_ONLY)
    local = {name_of(requirement) for requirement in pyproject["optional-dependencies"]["local"]}
    assert {"functions-framework", "google-cloud-pubsub"} <= local
    # requirements-cloud.txt pins the same projects, one for one
    assert dependencies == cloud_requirements()
