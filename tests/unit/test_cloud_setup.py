"""`make setup-cloud` installs requirements-cloud.txt and the kit, not the local stack's packages (a
dry run without them: integration/test_cloud_only_dry_run.py)."""
from visitkit.paths import ROOT


def test_requirements_cloud_holds_none_of_the_local_stacks_packages():
    cloud = (ROOT / "requirements-cloud.txt").read_text().lower()
    for package in ("functions-framework", "google-cloud-pubsub", "selenium", "schemathesis", "pytest"):
        assert package not in cloud
    assert "-r requirements-cloud.txt" in (ROOT / "requirements-dev.txt").read_text()
