"""The GCP target's logic with every command, HTTP call, clock and client faked: nothing reaches
Google, and `dry_run_plan` (what `run-iteration --target gcp --dry-run` prints) runs nothing. Our
functions' answers come from fake_google.OurFunctions, which tests/integration/test_contract.py holds
to the real functions; the outputs are named as infra/outputs.tf names them."""
import base64
import json
import re
import subprocess
import sys

import pytest

from visitkit.cloud import gcp, monitoring
from visitkit.model import cost
from visitkit import settle
from visitkit.runs import runner
from visitkit.runs.config import RunConfig
from visitkit.catalogue import FUNCTIONS, PAGES, PUBLIC_PATHS, function_of_path, stored_totals
from visitkit.cloud.idtoken import IdTokens
from visitkit.net import Answer
from visitkit.paths import ROOT
from visitkit.settings import load_settings
from visitkit.steps import run_steps
from fakes import FakeClock

sys.path.append(str(ROOT / "tests" / "integration"))  # our functions' stand-in, held to them by test_contract.py
from fake_google import OurFunctions  # noqa: E402

ITERATION_1 = ROOT / "iterations" / "iteration-1"
INFRA = ROOT / "infra"
BASE = "https://us-central1-p1.cloudfunctions.net"
# each function's run.app URL, as Cloud Run makes it (SERVICE-PROJECT_NUMBER.REGION.run.app)
AUDIENCES = {name: f"https://{path[1:]}-123456789012.us-central1.run.app" for path, name in PUBLIC_PATHS.items()}
# What `terraform output -json` prints after an apply of infra/ (test_the_outputs_are_infras checks the names)
OUTPUTS = {name: {"value": value, "type": "string", "sensitive": False} for name, value in {
    "base_url": BASE + "/", "subscription_name": "visits-store-inc-counter", "topic_name": "visits",
    "load_generator_service_account": "visitkit-loadgen@p1.iam.gserviceaccount.com",
    "function_urls": {name: BASE + path for path, name in PUBLIC_PATHS.items()},
    "function_audiences": AUDIENCES, "region": "us-central1",
    "requests_429_metric_name": "visitkit_requests_429",
    "store_deliveries_metric_name": "visitkit_store_deliveries"}.items()}


class FakeRun:
    """subprocess.run stand-in: records argv, answers `terraform output -json` with OUTPUTS."""

    def __init__(self, fail_on=None):
        self.calls = []
        self.fail_on = fail_on

    def __call__(self, argv, check, text, capture_output, echo=True):
        self.calls.append(argv)
        step = argv[2]
        code = 1 if step == self.fail_on else 0
        stdout = json.dumps(OUTPUTS) if step == "output" else ""
        return subprocess.CompletedProcess(argv, code, stdout, "")

    def steps(self):
        return [argv[2] for argv in self.calls]


class FakeFirestore:
    """Just the calls stored_totals makes: collection/document/collection/sum/get."""

    def __init__(self, shards):
        self.shards = shards  # {page: [count, ...]}
        self.closed = False
        self.summed = None

    def collection(self, name):
        assert name in ("counters", "shards")
        return self

    def document(self, page):
        return FakeFirestore({page: self.shards.get(page, [])})

    def sum(self, field, alias):
        assert field == "count"
        self.summed = alias
        return self

    def get(self, timeout):
        [counts] = self.shards.values()
        return [[type("Aggregation", (), {"alias": self.summed, "value": sum(counts)})()]]

    def close(self):
        self.closed = True


class StoringSite:
    """The deployed functions as the kit meets them: OurFunctions' answers, each 202 stored in
    FakeFirestore; a function in `not_ready` answers as Cloud Run does before it serves (404, HTML);
    with `token`, a request without that bearer token for its function's audience gets Cloud Run's 403."""

    def __init__(self, firestore, not_ready=(), token=None, cors_allowed_origins=()):
        self.firestore = firestore
        self.not_ready = set(not_ready)
        self.token = token
        self.functions = OurFunctions(cors_allowed_origins)
        self.requests = []

    def __call__(self, url, method, headers=None):
        self.requests.append((method, url))
        path = "/" + url.split("/", 3)[3]
        function = function_of_path(path)
        if self.token and (headers or {}).get("Authorization") != f"Bearer {self.token}:{AUDIENCES.get(function)}":
            return Answer(403, {"content-type": "text/html"}, b"<html><body>403 Forbidden</body></html>")
        if any(path.startswith(not_ready) for not_ready in self.not_ready):
            return Answer(404, {"content-type": "text/html"}, b"<html><body>404 Not Found</body></html>")
        status, answer_headers, body = self.functions.answer(method, path, headers)
        if status == 202:
            page = json.loads(body)["visit_type"]
            self.firestore.shards.setdefault(page, []).append(1)
        return Answer(status, {name.lower(): value for name, value in answer_headers.items()}, body)


# --- terraform -----------------------------------------------------------------------------------

def test_terraform_commands_use_the_iteration_settings_file_from_infra():
    commands = gcp.terraform_commands(ITERATION_1, "p1", "southamerica-east1", INFRA)
    assert commands["apply"][:5] == ["terraform", f"-chdir={INFRA}", "apply", "-auto-approve",
                                     "-input=false"]
    assert "-var-file=../iterations/iteration-1/settings.tfvars.json" in commands["apply"]
    assert "-var=project_id=p1" in commands["apply"]
    assert "-var=region=southamerica-east1" in commands["apply"]
    assert commands["destroy"][2] == "destroy"
    assert commands["destroy"][3:] == commands["apply"][3:]  # same variables, so the same resources


def test_without_region_the_infra_default_applies():
    commands = gcp.terraform_commands(ITERATION_1, "p1", None, INFRA)
    assert not any(arg.startswith("-var=region=") for arg in commands["apply"])


def test_parse_outputs_keeps_the_values():
    assert gcp.parse_outputs(json.dumps(OUTPUTS))["subscription_name"] == "visits-store-inc-counter"


def infra_outputs():
    return set(re.findall(r'^output "([a-z0-9_]+)"', (INFRA / "outputs.tf").read_text(), re.M))


def test_the_outputs_are_infras_and_so_is_every_one_the_kit_reads():
    kit = (ROOT / "scripts" / "visitkit" / "cloud" / "gcp.py").read_text()
    read = set(re.findall(r'outputs(?:\.get\(|\[)"([a-z0-9_]+)"', kit)) | set(monitoring.LOG_METRIC_OUTPUTS.values())
    assert {"base_url", "function_audiences", "subscription_name"} <= read
    assert read <= infra_outputs() and set(OUTPUTS) <= infra_outputs()


def test_a_failing_command_stops_with_the_command_named():
    with pytest.raises(gcp.GcpError, match="terraform .*apply"):
        gcp.run_command(["terraform", "-chdir=infra", "apply"], FakeRun(fail_on="apply"))


# --- readiness, warm-up, totals -------------------------------------------------------------------

def test_waits_until_every_http_function_answers_the_probe_as_only_our_code_does():
    clock, asked = FakeClock(), []
    site = StoringSite(FakeFirestore({}), not_ready=["/app"])  # serve-page not deployed yet on the first round

    def probe(url, method):
        asked.append(method)
        if len(asked) == 4:
            site.not_ready.clear()
        return site(url, method)

    gcp.wait_until_answering(BASE, probe, timeout=60, interval=10, now=clock.now, sleep=clock.sleep)
    assert clock.t == 10 and set(asked) == {gcp.READY_METHOD} and len(asked) == 4  # only serve-page asked again
    assert not site.firestore.shards  # the probe changed nothing


def our_refusal(**changes):
    answer = StoringSite(FakeFirestore({}))(BASE + "/inc-counter", gcp.READY_METHOD)
    fields = {"status": answer.status, "headers": answer.headers, "body": answer.body, **changes}
    return Answer(fields["status"], fields["headers"], fields["body"])


def test_only_our_own_refusal_of_the_probe_counts_as_ready():
    ours = our_refusal()
    assert ours.status == 405 and gcp.is_our_refusal(ours)
    html = {"content-type": "text/html", "allow": "GET, HEAD, POST"}
    platform_pages = [None, Answer(404, html, b"<html>404</html>"), Answer(503, html, b"<html>503</html>"),
                      Answer(403, html, b"<html>403 Forbidden</html>"),
                      Answer(405, html, b"<title>405 Method Not Allowed</title>")]  # Flask's own 405
    assert not any(map(gcp.is_our_refusal, platform_pages))
    without = {name: {key: value for key, value in ours.headers.items() if key != name}
               for name in ("allow", "content-security-policy")}
    assert not gcp.is_our_refusal(our_refusal(status=403))
    assert not gcp.is_our_refusal(our_refusal(headers=without["allow"]))
    assert not gcp.is_our_refusal(our_refusal(headers=without["content-security-policy"]))
    assert not gcp.is_our_refusal(our_refusal(headers={**ours.headers, "allow": "PUT"}))
    assert not gcp.is_our_refusal(our_refusal(body=b"method not allowed"))
    assert not gcp.is_our_refusal(our_refusal(body=b'{"message": "method not allowed"}'))


def test_gives_up_naming_the_functions_that_never_answered_and_what_they_answered():
    clock = FakeClock()
    site = StoringSite(FakeFirestore({}), not_ready=["/inc-counter"])
    with pytest.raises(gcp.GcpError, match=r"inc-counter \(HTTP 404\)$"):
        gcp.wait_until_answering(BASE, site, timeout=30, interval=10, now=clock.now, sleep=clock.sleep)


def test_the_readiness_and_first_visit_waits_are_the_targets_to_set():
    clock, firestore = FakeClock(), FakeFirestore({})
    deployed = target(run=FakeRun(), http=StoringSite(firestore, not_ready=["/app"]), firestore=firestore,
                      now=clock.now, sleep=clock.sleep, ready_timeout=20, first_visit_timeout=7)
    deployed._deploy()
    with pytest.raises(gcp.GcpError, match="after 20 s"):
        deployed._wait_ready()
    assert 20 <= clock.t < 40
    refusing = target(run=FakeRun(), http=lambda url, method, headers: Answer(503, {}, b""), firestore=firestore,
                      now=clock.now, sleep=clock.sleep, first_visit_timeout=7)
    refusing._deploy()
    with pytest.raises(gcp.GcpError, match="HTTP 503 for 7 s"):
        refusing._first_visit()


def test_totals_sum_the_shards_of_every_page():
    firestore = FakeFirestore({"home": [3, 4], "jobs": [1]})
    assert stored_totals(firestore) == {"home": 7, "jobs": 1, "about": 0, "about_legals": 0,
                                          "about_offices": 0}


def test_warm_up_visits_like_the_locust_visitor_and_counts_recorded_visits():
    site = StoringSite(FakeFirestore({}))
    recorded = gcp.warm_up(BASE, parallel=4, rounds=2, status=lambda url, method: site(url, method).status)
    assert recorded == 8
    posts = [url for method, url in site.requests if method == "POST"]
    assert len(posts) == 8 and all(url.startswith(BASE + "/inc-counter?visit_type=") for url in posts)
    assert {url.rsplit("=", 1)[1] for url in posts} == set(PAGES)


def test_waits_until_the_warm_up_visits_are_stored():
    clock = FakeClock()
    stored = iter([{"home": 1}, {"home": 5}])
    totals = settle.wait_until_stored(lambda: next(stored), {"home": 1}, 4, timeout=60, interval=10,
                                      now=clock.now, sleep=clock.sleep)
    assert totals == {"home": 5} and clock.t == 10
    with pytest.raises(gcp.GcpError, match="0 of 4"):
        settle.wait_until_stored(lambda: {"home": 1}, {"home": 1}, 4, timeout=20, interval=10,
                                 now=clock.now, sleep=clock.sleep, error=gcp.GcpError)


# --- the whole start and stop --------------------------------------------------------------------

def preflight_passing(project, access, credentials, before_creating=None, decides="public", needs=()):
    """The preflight's contract: the caller's own check runs last, before anything is created, and
    is told the access to deploy with (access "auto" decided: here as an organization that lets
    allUsers invoke)."""
    if before_creating is not None:
        before_creating(decides if access == "auto" else access)


def target(**options):
    options = {"preflight": preflight_passing, "log": lambda *_: None, **options}
    return gcp.GcpTarget(load_settings(ITERATION_1), ITERATION_1, "p1", infra_dir=INFRA, **options)


def quietly(steps):
    run_steps(steps, None, log=lambda *_: None)


def test_start_steps_deploy_wait_and_warm_and_the_stop_step_destroys():
    run, firestore = FakeRun(), FakeFirestore({})
    deployed = target(region="us-central1", destroy=True, run=run, http=StoringSite(firestore), firestore=firestore)
    quietly(deployed.start_steps())
    assert run.steps() == ["init", "apply", "output"]
    assert deployed.log_metrics == {"requests_429": "visitkit_requests_429",
                                    "store_deliveries": "visitkit_store_deliveries"}
    assert deployed.base_url == BASE and deployed.subscription == "visits-store-inc-counter"
    # one first visit, then (iteration 1: 2 instances x concurrency 1 at most) waves of 2 visits
    assert sum(deployed.totals().values()) == 1 + 2 * gcp.WARM_ROUNDS
    quietly([deployed.stop_step()])
    assert run.steps()[-1] == "destroy" and firestore.closed


def test_the_audit_reads_the_deployments_markers_at_its_regions_prices():
    class Markers(FakeFirestore):
        def collection(self, name):
            return self if name == "processed_messages" else super().collection(name)

        def document(self, name):
            return name

        def get_all(self, refs, field_paths, timeout):
            return [type("Snapshot", (), {"id": ref, "exists": True})() for ref in refs]

    deployed = target(region="southamerica-east1", firestore=Markers({}))
    assert deployed.billed_region == "southamerica-east1"
    assert deployed.stored_visits(["v1", "v2"]) == {"v1", "v2"}
    assert target().billed_region == cost.DEFAULT_REGION  # not deployed yet, no region asked for


def test_a_failed_start_with_destroy_tears_down():
    run, firestore, clock = FakeRun(), FakeFirestore({}), FakeClock()
    site = StoringSite(firestore, not_ready=["/get-counter"])
    deployed = target(destroy=True, run=run, http=site, firestore=firestore, now=clock.now, sleep=clock.sleep)
    with pytest.raises(gcp.GcpError, match="get-counter"):
        quietly([*deployed.start_steps(), deployed.stop_step()])
    assert run.steps() == ["init", "apply", "output", "destroy"]


def test_the_preflight_runs_first_and_a_failed_one_creates_nothing():
    run = FakeRun()

    def refuse(project, access, credentials, before_creating=None, needs=()):
        raise gcp.GcpError(f"no credentials for {project}")

    deployed = target(run=run, preflight=refuse, destroy=True)
    with pytest.raises(gcp.GcpError, match="no credentials for p1"):
        quietly([*deployed.start_steps(), deployed.stop_step()])
    assert run.steps() == ["destroy"]  # tear-down is harmless on nothing; no init, no apply


def test_a_target_without_project_is_refused():
    with pytest.raises(gcp.GcpError, match="--project"):
        gcp.GcpTarget(load_settings(ITERATION_1), ITERATION_1, None)


def test_live_sample_has_the_schema_with_no_figures():
    sample = target(firestore=FakeFirestore({})).sample()
    assert sample["source"] == "gcp-monitoring" and set(sample["functions"]) == set(FUNCTIONS)
    assert all(v is None for f in sample["functions"].values() for v in f.values())


def test_window_samples_read_the_subscription_from_the_outputs(tmp_path):
    class Client:
        def __init__(self):
            self.filters = []

        def list_time_series(self, request):
            self.filters.append(request["filter"])
            return []

    client = Client()
    deployed = target(run=FakeRun(), metrics_client=client, ingestion_delay=0)
    deployed._deploy()
    assert deployed.window_samples(0, 120, tmp_path, now=lambda: 1000, sleep=pytest.fail) == []
    assert any('subscription_id = "visits-store-inc-counter"' in f for f in client.filters)
    assert len(client.filters) == len(monitoring.QUERIES)


# --- dry run --------------------------------------------------------------------------------------

def dry_run(**options):
    config = RunConfig.build(ITERATION_1, "breakpoint", target="gcp", project="p1", **options)
    return "\n".join(runner.dry_run(config))


def test_dry_run_lists_every_step_and_command_and_runs_nothing(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a dry run must not run anything")

    monkeypatch.setattr(subprocess, "run", refuse)
    monkeypatch.setattr(gcp, "status_of", refuse)
    monkeypatch.setattr(gcp, "firestore_client", refuse)
    monkeypatch.setattr(monitoring, "monitoring_client", refuse)
    text = dry_run(region="us-central1", destroy=True)
    assert f"$ terraform -chdir={INFRA} init -input=false" in text
    assert ("apply -auto-approve -input=false -var-file=../iterations/iteration-1/settings.tfvars.json "
            "-var=project_id=p1 -var=region=us-central1") in text
    assert "output -json" in text
    assert "Locust test 'breakpoint'" in text
    for query in monitoring.QUERIES:
        assert query.metric_type.split("{")[0] in text
    assert text.index("preflight") < text.index("apply") < text.index("warm up") < text.index("Locust test")
    assert text.index("Locust test") < text.index("destroy")
    assert "apply retry policy: up to 3 tries" in text and "visits-dead-letter" in text
    assert "after 20 delivery attempts" in text


def test_dry_run_without_destroy_says_how_to_clean_up():
    text = dry_run()
    assert "region: infra default" in text
    step = text.split("leave the deployment running", 1)[1].splitlines()[1]
    assert "clean up later" in step and " destroy " in step


# --- authenticated access -------------------------------------------------------------------------

def fake_tokens():
    """IdTokens whose tokens name their audience, so a test can tell which function one was for."""
    return IdTokens(lambda audience: (f"t:{audience}", 4_000_000_000))


def test_an_authenticated_run_sends_an_id_token_for_each_function_and_grants_the_invokers():
    run, firestore = FakeRun(), FakeFirestore({})
    site = StoringSite(firestore, token="t")
    deployed = target(run=run, http=site, firestore=firestore, access="authenticated",
                      invokers=["user:tester@example.com"], id_tokens=fake_tokens())
    quietly(deployed.start_steps())
    apply = run.calls[1]
    assert "-var=access=authenticated" in apply and '-var=invokers=["user:tester@example.com"]' in apply
    assert sum(deployed.totals().values()) == 1 + 2 * gcp.WARM_ROUNDS  # nothing refused: every request signed
    assert deployed.locust_args == ["--auth", "id-token", "--quota-project", "p1",
                                    "--audiences", json.dumps(AUDIENCES, sort_keys=True)]


def test_a_token_is_minted_for_the_function_of_the_requests_path_whatever_its_host():
    tokens = fake_tokens()
    tokens.audiences = AUDIENCES
    for host in (BASE, "https://visits.example.com", "http://203.0.113.7"):  # with edge_protection, the LB's
        assert tokens.headers(f"{host}/inc-counter?visit_type=home") == {
            "Authorization": f"Bearer t:{AUDIENCES['inc-counter']}"}
    with pytest.raises(gcp.GcpError, match="no ID token audience is known for https://x.example/other"):
        tokens.headers("https://x.example/other")


def test_an_authenticated_deployment_without_function_audiences_stops_before_sending_anything():
    class OlderApply(FakeRun):
        def __call__(self, argv, check, text, capture_output, echo=True):
            done = super().__call__(argv, check, text, capture_output, echo)
            outputs = {name: output for name, output in OUTPUTS.items() if name != "function_audiences"}
            return subprocess.CompletedProcess(argv, 0, json.dumps(outputs), "") if argv[2] == "output" else done

    site = StoringSite(FakeFirestore({}), token="t")
    deployed = target(run=OlderApply(), http=site, access="authenticated", invokers=["user:tester@example.com"],
                      id_tokens=fake_tokens())
    with pytest.raises(gcp.GcpError, match="no function_audiences"):
        deployed._deploy()
    assert site.requests == []


def test_a_public_run_sends_no_token_and_passes_access_public():
    run, firestore = FakeRun(), FakeFirestore({})
    deployed = target(run=run, http=StoringSite(firestore), firestore=firestore)
    quietly(deployed.start_steps())
    assert "-var=access=public" in run.calls[1] and not any(a.startswith("-var=invokers") for a in run.calls[1])
    assert deployed.locust_args == []


def test_access_auto_deploys_as_the_preflight_decides_in_an_organization_that_refuses_all_users():
    run, firestore, token = FakeRun(), FakeFirestore({}), "t"

    def refusing_organization(project, access, credentials, before_creating=None, needs=()):
        assert access == "auto"  # the settings file says nothing: the kit decides
        preflight_passing(project, access, credentials, before_creating, decides="authenticated")

    class Creds:  # a service account key's credentials, as google-auth names them
        __module__ = "google.oauth2.service_account"
        service_account_email = "loadgen@p1.iam.gserviceaccount.com"

    deployed = target(run=run, preflight=refusing_organization, credentials=Creds(), firestore=firestore,
                      http=StoringSite(firestore, token=token),
                      id_tokens=IdTokens(lambda audience: (f"{token}:{audience}", 4_000_000_000)))
    assert deployed.access == "auto"
    quietly([*deployed.start_steps(), deployed.stop_step()])
    assert deployed.access == "authenticated" and deployed.locust_args[:2] == ["--auth", "id-token"]
    apply = next(call for call in run.calls if call[2] == "apply")
    assert "-var=access=authenticated" in apply and "-var=access=auto" not in apply


def test_a_dry_run_with_access_auto_says_it_will_be_decided_and_gives_terraform_no_auto():
    text = dry_run()
    assert "access: auto, decided by the preflight from the organization policy" in text
    assert "Organization Policy: access will be decided by the effective iam.allowedPolicyMemberDomains" in text
    assert f"-var=access={gcp.DECIDED_ACCESS}" in text and "-var=access=auto" not in text


def test_without_dead_letter_the_plan_says_what_a_failing_delivery_then_does(tmp_path):
    raw = json.loads((ITERATION_1 / "settings.tfvars.json").read_text())
    (tmp_path / "settings.tfvars.json").write_text(json.dumps({**raw, "dead_letter": False}))
    deploy = gcp.GcpTarget(load_settings(tmp_path), tmp_path, "p1", infra_dir=INFRA).start_steps()[1]
    text = "\n".join(deploy.details)
    assert "dead_letter: false" in text and "retried until its message expires" in text
    assert "visits-dead-letter" not in text


REFUSED_AGENT = """
Error: Error applying IAM policy for pubsub topic "projects/p1/topics/visits-dead-letter": Error setting IAM policy
for pubsub topic "projects/p1/topics/visits-dead-letter": googleapi: Error 400: One or more users named in the policy
do not belong to a permitted customer,  perhaps due to an organization policy.
Details: [ { "@type": "type.googleapis.com/google.rpc.PreconditionFailure", "violations": [ { "description":
"User service-123456789012@gcp-sa-pubsub.iam.gserviceaccount.com is not in permitted organization.",
"subject": "orgpolicy:projects/p1", "type": "constraints/iam.allowedPolicyMemberDomains" } ] } ]
"""


class RefusingAgent(FakeRun):
    """An organization whose domain restriction refuses the dead-letter grants to Pub/Sub's agent."""

    def __call__(self, argv, check, text, capture_output, echo=True):
        if argv[2] == "apply" and "-var=dead_letter=false" not in argv:
            self.calls.append(argv)
            return subprocess.CompletedProcess(argv, 1, REFUSED_AGENT, "")
        return super().__call__(argv, check, text, capture_output, echo)


def test_an_organization_refusing_pubsubs_agent_deploys_without_dead_letters_and_says_so():
    run, logged = RefusingAgent(), []
    deployed = target(run=run, log=logged.append)
    deployed._deploy()
    applies = [call for call in run.calls if call[2] == "apply"]
    assert len(applies) == 2 and "-var=dead_letter=false" in applies[1]
    assert "-var=dead_letter=false" in deployed.commands["destroy"]
    assert any(line.startswith("dead_letter: false, since the organization refuses") for line in logged)


class RefusingAllUsers(FakeRun):
    """An organization that refuses allUsers on the functions (the recorded text) while access is public."""

    def __call__(self, argv, check, text, capture_output, echo=True):
        if argv[2] == "apply" and "-var=access=public" in argv:
            self.calls.append(argv)
            return subprocess.CompletedProcess(argv, 1, (ROOT / "tests" / "fixtures" / "terraform" /
                                                         "stop-org-policy-all-users.txt").read_text(), "")
        return super().__call__(argv, check, text, capture_output, echo)


class ServiceAccountKey:  # a service account key's credentials, as google-auth names them
    __module__ = "google.oauth2.service_account"
    service_account_email = "loadgen@p1.iam.gserviceaccount.com"


def test_access_auto_that_could_not_read_the_policy_goes_on_authenticated_when_the_apply_is_refused_all_users():
    run, logged = RefusingAllUsers(), []
    deployed = target(run=run, log=logged.append, credentials=ServiceAccountKey(),
                      id_tokens=IdTokens(lambda audience: ("t", 4_000_000_000)))
    deployed._check()  # the preflight could not read the policy: public
    assert deployed.access == "public"
    deployed._deploy()
    applies = [call for call in run.calls if call[2] == "apply"]
    assert len(applies) == 2 and "-var=access=authenticated" in applies[1] and deployed.access == "authenticated"
    assert any("access auto: authenticated, since the apply was refused allUsers" in line for line in logged)


def test_an_explicit_public_access_refused_all_users_stops_with_both_ways_out():
    run = RefusingAllUsers()
    deployed = target(run=run, access="public")
    with pytest.raises(gcp.GcpError, match="--access authenticated"):
        deployed._deploy()
    assert [call[2] for call in run.calls].count("apply") == 1


def test_a_settings_file_that_asks_for_dead_letters_stops_instead(tmp_path):
    raw = json.loads((ITERATION_1 / "settings.tfvars.json").read_text())
    (tmp_path / "settings.tfvars.json").write_text(json.dumps({**raw, "dead_letter": True}))
    run = RefusingAgent()
    deployed = gcp.GcpTarget(load_settings(tmp_path), tmp_path, "p1", infra_dir=INFRA, run=run, log=lambda *_: None)
    with pytest.raises(gcp.GcpError, match="dead_letter"):  # the stop hint names the way out
        deployed._deploy()
    assert [call[2] for call in run.calls].count("apply") == 1


def test_the_settings_files_access_applies_unless_a_flag_overrides_it(tmp_path):
    raw = json.loads((ITERATION_1 / "settings.tfvars.json").read_text())
    (tmp_path / "settings.tfvars.json").write_text(json.dumps({**raw, "access": "authenticated"}))
    settings = load_settings(tmp_path)
    assert gcp.GcpTarget(settings, tmp_path, "p1", infra_dir=INFRA).access == "authenticated"
    assert gcp.GcpTarget(settings, tmp_path, "p1", infra_dir=INFRA, access="public").access == "public"


def test_invokers_default_to_the_credentials_account_and_tokens_are_minted_before_anything_is_created():
    calls = []

    class Creds:  # a service account key's credentials, as google-auth names them
        __module__ = "google.oauth2.service_account"
        service_account_email = "loadgen@p1.iam.gserviceaccount.com"

    deployed = target(access="authenticated", credentials=Creds(), id_tokens=IdTokens(
        lambda audience: calls.append(("mint", audience)) or ("t", 4_000_000_000)),
        preflight=lambda project, access, credentials, before_creating, needs: (
            calls.append(("checks", access)), before_creating(access), calls.append(("create", access))))
    deployed._check()
    assert deployed.invokers == ["serviceAccount:loadgen@p1.iam.gserviceaccount.com"]
    assert '-var=invokers=["serviceAccount:loadgen@p1.iam.gserviceaccount.com"]' in deployed.commands["apply"]
    assert [c[0] for c in calls] == ["checks", "mint", "create"] and calls[1][1].endswith(".run.app")


def unsigned_jwt(claims):
    def part(value):
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()
    return f"{part({'alg': 'RS256'})}.{part(claims)}.{part('sig')}"


class UserLogin:
    """`gcloud auth application-default login` credentials, as google-auth names them."""
    __module__ = "google.oauth2.credentials"
    id_token = unsigned_jwt({"email": "me@example.com", "aud": "764086051850-adc.apps.googleusercontent.com"})


def test_a_user_login_acts_as_the_load_generator_once_google_lets_it():
    run, firestore, clock, asked = FakeRun(), FakeFirestore({}), FakeClock(), []
    refusals = iter([True, True])  # the new token-creator binding is not honoured for two tries

    def tokens_as(service_account):
        asked.append(service_account)

        def mint(audience):
            if next(refusals, False):
                raise gcp.GcpError("Could not mint an ID token: iam.serviceAccounts.getOpenIdToken denied")
            return f"t:{audience}", 4_000_000_000
        return IdTokens(mint)

    deployed = target(run=run, http=StoringSite(firestore, token="t"), firestore=firestore, access="authenticated",
                      credentials=UserLogin(), tokens_as=tokens_as, now=clock.now, sleep=clock.sleep)
    quietly(deployed.start_steps())
    apply = run.calls[1]
    assert '-var=invokers=["user:me@example.com"]' in apply
    assert '-var=load_generator_users=["user:me@example.com"]' in apply
    assert asked == ["visitkit-loadgen@p1.iam.gserviceaccount.com"] and clock.t == 30
    assert deployed.locust_args == ["--auth", "id-token", "--quota-project", "p1",
                                    "--audiences", json.dumps(AUDIENCES, sort_keys=True),
                                    "--impersonate", "visitkit-loadgen@p1.iam.gserviceaccount.com"]
    assert sum(deployed.totals().values()) == 1 + 2 * gcp.WARM_ROUNDS


class CloudShell:
    """Cloud Shell's application-default credentials: the metadata server's, speaking for the user."""
    __module__ = "google.auth.compute_engine.credentials"
    service_account_email = "default"

    def refresh(self, request):
        self.service_account_email = "me@example.com"


def test_cloud_shell_is_granted_as_its_user_and_acts_as_the_load_generator(monkeypatch):
    monkeypatch.setenv("CLOUD_SHELL", "true")
    run, firestore, asked = FakeRun(), FakeFirestore({}), []

    def tokens_as(service_account):
        asked.append(service_account)
        return IdTokens(lambda audience: (f"t:{audience}", 4_000_000_000))

    deployed = target(run=run, http=StoringSite(firestore, token="t"), firestore=firestore, access="authenticated",
                      credentials=CloudShell(), tokens_as=tokens_as)
    quietly(deployed.start_steps())
    apply = next(call for call in run.calls if call[2] == "apply")
    assert '-var=invokers=["user:me@example.com"]' in apply
    assert '-var=load_generator_users=["user:me@example.com"]' in apply
    assert asked == ["visitkit-loadgen@p1.iam.gserviceaccount.com"]


def test_functions_refusing_the_token_are_named_with_the_propagation_hint():
    clock = FakeClock()
    with pytest.raises(gcp.GcpError, match=r"refused your requests \(403\).*run the same command again"):
        gcp.wait_until_answering(BASE, StoringSite(FakeFirestore({}), token="t"), timeout=30, interval=10,
                                 now=clock.now, sleep=clock.sleep)


# --- the first visit ----------------------------------------------------------------------------------

def test_the_first_visit_waits_through_refused_pushes_and_says_why():
    clock, firestore, logged = FakeClock(), FakeFirestore({}), []
    stored_after = 120  # Pub/Sub's retry got through once the binding propagated

    def status(url, method):
        return 202

    def totals():
        return {"home": 1 if clock.t >= stored_after else 0}

    gcp.first_visit_stored(BASE, status, totals, timeout=660, refusals=lambda: 2, log=logged.append,
                           now=clock.now, sleep=clock.sleep)
    assert clock.t >= stored_after and len(logged) == 1 and "403" in logged[0] and "not propagated" in logged[0]


def test_a_first_visit_never_stored_because_of_refused_pushes_says_what_to_do():
    clock = FakeClock()
    with pytest.raises(gcp.GcpError, match="refused Pub/Sub's push with 403.*run the same command again"):
        gcp.first_visit_stored(BASE, lambda url, method: 202, lambda: {"home": 0}, timeout=660,
                               refusals=lambda: 1, log=lambda *_: None, now=clock.now, sleep=clock.sleep)
    assert clock.t >= 660


@pytest.mark.parametrize("refused", [403, 404, 429, 503])
def test_a_first_visit_refused_while_the_deployment_propagates_is_posted_again_with_its_id(refused):
    clock, logged, posted = FakeClock(), [], []
    answers = [refused, refused, 202]

    def status(url, method):
        posted.append(url)
        return answers.pop(0)

    gcp.first_visit_stored(BASE, status, lambda: {"home": len(posted) >= 3}, timeout=660, log=logged.append,
                           now=clock.now, sleep=clock.sleep)
    assert len(posted) == 3 and len(set(posted)) == 1 and "visit_id=" in posted[0]  # one visit, counted once
    assert len(logged) == 1 and f"HTTP {refused}" in logged[0] and "probably" in logged[0]


def test_a_first_visit_still_refused_after_five_minutes_stops_saying_what_propagates():
    clock = FakeClock()
    with pytest.raises(gcp.GcpError, match=r"HTTP 403 for 300 s; probably a run.invoker binding"):
        gcp.first_visit_stored(BASE, lambda url, method: 403, lambda: {"home": 0}, timeout=660,
                               log=lambda *_: None, now=clock.now, sleep=clock.sleep)
    assert 300 <= clock.t < 320


@pytest.mark.parametrize("answer", [400, 500, 502])
def test_a_first_visit_answered_otherwise_stops_at_once(answer):
    clock, posted = FakeClock(), []
    with pytest.raises(gcp.GcpError, match=rf"HTTP {answer}\)"):
        gcp.first_visit_stored(BASE, lambda url, method: posted.append(url) or answer, lambda: {"home": 0},
                               timeout=660, log=lambda *_: None, now=clock.now, sleep=clock.sleep)
    assert len(posted) == 1 and clock.t == 0


def test_the_first_visit_waits_at_least_the_maximum_backoff_and_the_ack_deadline():
    deployed = target()
    subscription = deployed.settings.subscription
    assert deployed.redelivery_wait == subscription.maximum_backoff_seconds + subscription.ack_deadline_seconds
    assert deployed.min_convergence_wait >= subscription.maximum_backoff_seconds


def test_push_refusals_reads_store_inc_counters_403s_from_its_request_logs():
    class Session:
        def post(self, url, timeout, json):
            self.url, self.body = url, json
            return type("Reply", (), {"status_code": 200, "json": lambda self: {"entries": [{}, {}]}})()

    session = Session()
    assert gcp.push_refusals(session, "p1", "2026-11-23T08:00:00+00:00") == 2
    assert session.url.endswith("/v2/entries:list") and session.body["resourceNames"] == ["projects/p1"]
    assert 'resource.labels.service_name="store-inc-counter"' in session.body["filter"]
    assert "httpRequest.status=403" in session.body["filter"]


def test_the_audit_of_a_pull_store_reads_its_batch_documents_not_markers(tmp_path):
    class Batches(FakeFirestore):
        def collection(self, name):
            assert name == "visit_batches", name  # a pull store writes no markers
            return self

        def select(self, fields):
            return self

        def stream(self, timeout):
            return [{"ids": ["v1", "v2"]}, {"ids": ["v2"]}]

    settings = json.loads((ROOT / "iterations" / "iteration-7" / "settings.tfvars.json").read_text())
    (tmp_path / "settings.tfvars.json").write_text(json.dumps(settings))
    deployed = gcp.GcpTarget(load_settings(tmp_path), tmp_path, "p1", infra_dir=INFRA, firestore=Batches({}))
    assert deployed.stored_visits(["v1", "v2", "v3"]) == {"v1": 1, "v2": 2}  # v2 counted twice: a duplicate
