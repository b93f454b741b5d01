"""Iteration settings: the files in iterations/ load, and nonsense is refused; what infra/ gives the
functions (their environment in main.tf, the markers' index exemptions in firestore.tf) is what the
Python side makes of them."""
import ast
import dataclasses
import json
import re

import pytest

from visitkit.catalogue import FIRESTORE, FUNCTIONS
from visitkit.errors import SettingsError
from visitkit.paths import FUNCTIONS_DIR, ROOT
from visitkit.settings import (
    DEFAULT_SCALING,
    MESSAGES,
    SCALING_MODES,
    Settings,
    check_invokers,
    function_environment,
    load_settings,
    parse_settings,
)

ITERATIONS = sorted(ROOT.glob("iterations/iteration-[0-3]/settings.tfvars.json"))
VARIABLES_TF = (ROOT / "infra" / "variables.tf").read_text()
MAIN_TF = (ROOT / "infra" / "main.tf").read_text()
FIRESTORE_TF = (ROOT / "infra" / "firestore.tf").read_text()
STUDY = {  # iteration: (shards, cache TTL, store-inc-counter instances), as in the study
    "iteration-0": (2, 0, 2), "iteration-1": (2, 10, 2), "iteration-2": (20, 10, 2), "iteration-3": (20, 10, 4)}


def test_there_is_a_settings_file_per_study_iteration():
    assert [p.parent.name for p in ITERATIONS] == list(STUDY)


@pytest.mark.parametrize("path", ITERATIONS, ids=lambda p: p.parent.name)
def test_iteration_settings_match_the_study(path):
    settings = load_settings(path)
    shards, ttl, store_instances = STUDY[path.parent.name]
    assert (settings.shards_per_page, settings.cache_ttl_seconds) == (shards, ttl)
    assert settings.functions["store-inc-counter"].max_instances == store_instances
    for name in FUNCTIONS:
        assert settings.functions[name].concurrency == 1
        if name != "store-inc-counter":
            assert settings.functions[name].max_instances == 2


def good():
    return json.loads(ITERATIONS[0].read_text())


@pytest.mark.parametrize("change", [
    lambda s: s.update(shards_per_page=0),
    lambda s: s.update(shards_per_page="2"),
    lambda s: s.update(cache_ttl_seconds=-1),
    lambda s: s["functions"]["get-counter"].update(max_instances=0),
    lambda s: s["functions"]["inc-counter"].update(concurrency=1.5),
    lambda s: s["functions"].update(unknown={"max_instances": 1}),
])
def test_nonsense_is_refused(change):
    raw = good()
    change(raw)
    with pytest.raises(SettingsError):
        parse_settings(raw)


def terraform_messages():
    """Every validation message of infra/variables.tf, unescaped, by the variable it belongs to."""
    by_variable = {}
    for block in re.split(r'^variable "', VARIABLES_TF, flags=re.M)[1:]:
        name = block.split('"', 1)[0]
        found = re.findall(r'error_message\s*=\s*"((?:[^"\\]|\\.)*)"', block)
        by_variable[name] = {text.replace('\\"', '"') for text in found}
    return by_variable


def test_every_rule_says_what_terraform_says():
    """The local stack refuses exactly what `terraform plan` refuses, in the same words: each
    message here is one of variables.tf's, and each of its messages on a settings key is here."""
    by_variable = terraform_messages()
    terraform = set().union(*by_variable.values())
    assert set(MESSAGES.values()) <= terraform, set(MESSAGES.values()) - terraform
    # the variables a settings file holds (the others are the deployment's: project, region, alerts...)
    settings_keys = {field.name for field in dataclasses.fields(Settings)}
    on_settings = set().union(*(messages for name, messages in by_variable.items() if name in settings_keys))
    assert on_settings and on_settings <= set(MESSAGES.values()), on_settings - set(MESSAGES.values())


def function(**changes):
    return lambda s: s["functions"]["get-counter"].update(changes)


def pull_store(raw, **store):
    """raw in pull mode, store-inc-counter given `store`."""
    raw.update(store_mode="pull")
    raw["functions"]["store-inc-counter"].update(store)


@pytest.mark.parametrize("change, rule", [
    (lambda s: s.update(shards_per_page=0), "shards_per_page"),
    (lambda s: s.update(marker_ttl_days=0), "marker_ttl_days"),
    (lambda s: s["functions"].pop("serve-page"), "functions"),
    (function(max_instances=1001), "max_instances"),
    (function(concurrency=1001), "concurrency"),
    (function(timeout_seconds=3601), "timeout_seconds"),
    (function(memory="256MB"), "memory"),
    (function(cpu=1), "cpu"),
    (function(cpu="9"), "cpu"),
    (function(concurrency=8, cpu="0.5"), "cpu_for_concurrency"),
    (function(memory="1Gi"), "cpu_for_512mib"),  # the default cpu, 1/6, is too little
    (function(memory="2G", cpu="0.5"), "cpu_for_1gib"),
    (function(cpu="1.5"), "cpu_whole"),
    (function(min_instances=-1), "min_instances"),
    (function(min_instances=3), "min_instances"),  # above its max_instances, 2
    (function(min_instances=1.5), "min_instances"),
    (lambda s: s.update(access="private"), "access"),
    (lambda s: s.update(access=None), "access"),
    (lambda s: s.update(subscription={"ack_deadline_seconds": 5}), "ack_deadline_seconds"),
    (lambda s: s.update(subscription={"minimum_backoff_seconds": 700}), "backoff"),
    (lambda s: s.update(subscription={"minimum_backoff_seconds": 60, "maximum_backoff_seconds": 30}), "backoff"),
    (lambda s: s.update(subscription={"max_delivery_attempts": 4}), "max_delivery_attempts"),
    (lambda s: s.update(subscription={"message_retention_seconds": 599}), "message_retention_seconds"),
    (lambda s: s.update(store_mode="pulls"), "store_mode"),
    (lambda s: s.update(store_mode=None), "store_mode"),
    (lambda s: s.update(pull={"batch_size": 0}), "pull"),
    (lambda s: s.update(pull={"batch_size": 1001}), "pull"),
    (lambda s: s.update(pull={"flush_ms": 9}), "pull"),
    (lambda s: s.update(pull={"flush_ms": 10001}), "pull"),
    (lambda s: s.update(pull={"dedup_window_minutes": 9}), "pull"),
    (lambda s: s.update(pull={"dedup_window_minutes": 1441}), "pull"),
    (lambda s: s.update(pull={"batch_size": 1.5}), "pull"),
    (lambda s: s.update(store_mode="pull"), "pull_instances"),  # the study's 2 store instances, none kept warm
    (lambda s: pull_store(s, max_instances=2, min_instances=1), "pull_instances"),
    (lambda s: pull_store(s, max_instances=1, min_instances=0), "pull_instances"),
    (lambda s: s.update(page_embeds_count="yes"), "page_embeds_count"),
    (lambda s: s.update(page_embeds_count=1), "page_embeds_count"),
    (lambda s: s.update(scaling="elastic"), "scaling"),
    (lambda s: s.update(scaling=None), "scaling"),
])
def test_each_rule_refuses_with_its_message(change, rule):
    raw = good()
    change(raw)
    with pytest.raises(SettingsError) as refused:
        parse_settings(raw, "settings.tfvars.json")
    assert MESSAGES[rule] in str(refused.value)


@pytest.mark.parametrize("change", [
    function(memory="1Gi", cpu="0.5"), function(memory="4Gi", cpu="2"), function(concurrency=80),
    function(concurrency=1000, cpu="4", memory="2Gi"),
    lambda s: s.update(subscription={"max_delivery_attempts": 100, "maximum_backoff_seconds": 60}),
    function(min_instances=2), lambda s: s.update(access="authenticated"), lambda s: s.update(access="public"),
    lambda s: pull_store(s, max_instances=1, min_instances=1),
    lambda s: s.update(pull={"batch_size": 1000, "flush_ms": 10, "dedup_window_minutes": 1440}),
    lambda s: s.update(pull={"batch_size": 1, "flush_ms": 10000, "dedup_window_minutes": 10}),
    lambda s: s.update(page_embeds_count=True),
])
def test_what_cloud_run_accepts_loads(change):
    raw = good()
    change(raw)
    parse_settings(raw)


def test_unknown_settings_are_named():
    with pytest.raises(SettingsError, match="shards_per_pages"):
        parse_settings({**good(), "shards_per_pages": 3})


def test_pull_settings_default_to_pushing_as_iterations_0_to_6_do():
    settings = parse_settings(good())
    assert (settings.store_mode, settings.page_embeds_count, settings.pulls) == ("push", False, False)
    assert (settings.pull.batch_size, settings.pull.flush_ms, settings.pull.dedup_window_minutes) == (500, 500, 60)
    # Terraform's defaults are the same
    assert (variable_default("store_mode"), variable_default("page_embeds_count")) == ("push", False)
    pull = re.search(r'^variable "pull" \{\n(.*?)^\}', VARIABLES_TF, re.M | re.S)
    assert pull, "infra/variables.tf declares no pull"
    optional = {key: int(value) for key, value in re.findall(r"(\w+)\s*=\s*optional\(number, (\d+)\)", pull[1])}
    assert optional == dataclasses.asdict(settings.pull)


def test_scaling_is_declared_in_terraform_with_the_twins_modes_and_default():
    """The twin's alone, but declared in infra/variables.tf so that a settings file that sets it plans (its
    terraform test, tests/scaling.tftest.hcl, plans one): the same modes, the same default."""
    assert variable_default("scaling") == DEFAULT_SCALING == parse_settings(good()).scaling
    block = re.search(r'^variable "scaling" \{\n(.*?)^\}', VARIABLES_TF, re.M | re.S)
    assert block, "infra/variables.tf declares no scaling"
    modes = re.search(r"contains\((\[.*?\]), var\.scaling\)", block[1])
    assert modes and tuple(json.loads(modes[1])) == SCALING_MODES


def test_unknown_pull_keys_are_named():
    with pytest.raises(SettingsError, match="batchsize"):
        parse_settings({**good(), "pull": {"batchsize": 10}})


def pulling(**pull):
    raw = good()
    pull_store(raw, max_instances=1, min_instances=1)
    return parse_settings({**raw, "pull": pull, "page_embeds_count": True})


def test_every_function_is_told_the_store_mode_and_whether_the_page_embeds_its_count():
    for settings, mode, embeds in ((parse_settings(good()), "push", "0"), (pulling(), "pull", "1")):
        for name in FUNCTIONS:
            environment = function_environment(settings, name, project="p", topic="t")
            assert (environment["STORE_MODE"], environment["PAGE_EMBEDS_COUNT"]) == (mode, embeds)


def test_in_pull_mode_the_store_alone_gets_its_subscription_and_batches():
    settings = pulling(batch_size=200, flush_ms=250, dedup_window_minutes=30)
    pulled = {"PULL_SUBSCRIPTION": "visits-store-inc-counter", "PULL_BATCH_SIZE": "200", "PULL_FLUSH_MS": "250",
              "DEDUP_WINDOW_MINUTES": "30"}
    store = function_environment(settings, "store-inc-counter", project="p", topic="visits")
    assert {key: store[key] for key in pulled} == pulled
    twin = function_environment(settings, "store-inc-counter", project="p", topic="visits", pull_subscription="own")
    assert twin["PULL_SUBSCRIPTION"] == "own"
    for name in FUNCTIONS:
        if name != "store-inc-counter":
            assert not set(pulled) & set(function_environment(settings, name, project="p", topic="visits"))
    pushing = function_environment(parse_settings(good()), "store-inc-counter", project="p", topic="visits")
    assert not set(pulled) & set(pushing)


def test_the_pull_environment_is_the_one_terraform_gives_the_store():
    block = re.search(r"\n  pull_environment = \{\n(.*?)\n  \}", MAIN_TF, re.S)
    assert block, "infra/main.tf has no `pull_environment = {...}` local"
    terraform = dict(re.findall(r"^\s*(\w+)\s*=\s*(.+?)\s*$", block[1], re.M))
    store = function_environment(pulling(), "store-inc-counter", project="p", topic="visits")
    shared = function_environment(parse_settings(good()), "store-inc-counter", project="p", topic="visits")
    assert set(store) - set(shared) == set(terraform)
    # the subscription's short name: Terraform's "${var.topic_name}-store-inc-counter", the default here
    assert terraform["PULL_SUBSCRIPTION"] == '"${var.topic_name}-store-inc-counter"'
    assert store["PULL_SUBSCRIPTION"] == "visits-store-inc-counter"
    for variable, setting in (("PULL_BATCH_SIZE", "batch_size"), ("PULL_FLUSH_MS", "flush_ms"),
                              ("DEDUP_WINDOW_MINUTES", "dedup_window_minutes")):
        assert f"var.pull.{setting}" in terraform[variable]


def test_subscription_defaults_are_terraforms():
    subscription = parse_settings(good()).subscription
    assert (subscription.ack_deadline_seconds, subscription.minimum_backoff_seconds,
            subscription.maximum_backoff_seconds, subscription.max_delivery_attempts) == (60, 10, 600, 20)


def test_the_local_functions_get_the_environment_terraform_sets():
    block = re.search(r"\n  environment = \{\n(.*?)\n  \}", MAIN_TF, re.S)
    assert block, "infra/main.tf has no `environment = {...}` local"
    terraform = dict(re.findall(r"^\s*(\w+)\s*=\s*(.+?)\s*$", block[1], re.M))
    public = re.search(r"\n  public_environment = \{ (\w+) = (.+) \}\n", MAIN_TF)
    assert public, "infra/main.tf has no `public_environment = {...}` local"
    per_function = re.search(r"\{ (\w+) = tostring\(f\.(\w+)\) \}", MAIN_TF)
    assert per_function, "infra/main.tf adds no per-function variable to local.environment"
    terraform[per_function[1]] = f"var.functions.{per_function[2]}"
    raw = {**json.loads(ITERATIONS[0].read_text()),
           "cors_allowed_origins": ["https://a.example", "https://b.example"]}
    settings = parse_settings(raw)
    store = function_environment(settings, "store-inc-counter", project="p", topic="visits")
    assert set(terraform) == set(store)  # the push-only function: the shared environment and THREADS
    local = function_environment(settings, "get-counter", project="p", topic="visits")
    assert set(terraform) | {public[1]} == set(local)  # a public one: and CORS_ALLOWED_ORIGINS, as Terraform joins it
    page = function_environment(settings, "serve-page", project="p", topic="visits")
    assert set(terraform) | {public[1], "PAGE_IDLE_SECONDS"} == set(page)  # the page: and its idle stop (below)
    assert "var.cors_allowed_origins" in public[2] and local[public[1]] == "https://a.example,https://b.example"
    for variable, setting in (("SHARDS_PER_PAGE", "shards_per_page"), ("CACHE_TTL_SECONDS", "cache_ttl_seconds"),
                              ("MARKER_TTL_DAYS", "marker_ttl_days"), ("THREADS", "functions.concurrency")):
        assert f"var.{setting}" in terraform[variable]


def variable_default(name):
    block = re.search(rf'^variable "{name}" {{\n(.*?)^}}', VARIABLES_TF, re.M | re.S)
    assert block, f"infra/variables.tf declares no {name}"
    return json.loads(re.search(r"^  default\s*=\s*(.+)$", block[1], re.M)[1])


def test_serve_page_alone_gets_the_idle_stop_as_terraform_gives_it():
    page = re.search(r"\n  page_environment = \{ (\w+) = tostring\(var\.(\w+)\) \}\n", MAIN_TF)
    assert page, "infra/main.tf has no `page_environment = {...}` local"
    variable, setting = page[1], page[2]
    assert (variable, setting) == ("PAGE_IDLE_SECONDS", "page_idle_seconds")
    # Terraform merges it into the function whose catalogue role is "page" (serve-page), and no other.
    assert re.search(r'role, ""\) == "page" \? local\.page_environment : \{\}', MAIN_TF)
    default = variable_default(setting)
    assert default == 600
    for raw, expected in ((good(), str(default)), ({**good(), setting: 0}, "0"), ({**good(), setting: 86400}, "86400")):
        settings = parse_settings(raw)  # a settings file may set it (TERRAFORM_ONLY), as Terraform's -var-file
        environments = {name: function_environment(settings, name, project="p", topic="t") for name in FUNCTIONS}
        assert {name: env.get(variable) for name, env in environments.items()} == {
            "serve-page": expected, "get-counter": None, "inc-counter": None, "store-inc-counter": None}
        # The page re-reads every max(its refresh, get-counter's cache TTL): serve-page gets the TTL in both.
        assert environments["serve-page"]["CACHE_TTL_SECONDS"] == str(settings.cache_ttl_seconds)
    assert re.search(r"^\s*CACHE_TTL_SECONDS\s*=\s*tostring\(var\.cache_ttl_seconds\)", MAIN_TF, re.M)


def test_each_function_serves_as_many_requests_at_once_as_its_concurrency():
    raw = good()
    raw["functions"]["get-counter"].update(concurrency=80, cpu="1")
    settings = parse_settings(raw)
    threads = {name: function_environment(settings, name, project="p", topic="t")["THREADS"] for name in FUNCTIONS}
    assert threads == {"serve-page": "1", "get-counter": "80", "inc-counter": "1", "store-inc-counter": "1"}


@pytest.mark.parametrize("member, ok", [
    ("user:me@example.com", True), ("serviceAccount:lg@p.iam.gserviceaccount.com", True),
    ("me@example.com", False), ("user:", False), ("user:a b", False)])
def test_invokers_are_checked_as_terraform_checks_them(member, ok):
    if ok:
        assert check_invokers([member]) == (member,)
    else:
        with pytest.raises(SettingsError, match="must be an IAM principal"):
            check_invokers([member])


def test_access_is_auto_unless_the_file_says_otherwise():
    assert parse_settings(good()).access == "auto"
    assert parse_settings({**good(), "access": "auto"}).access == "auto"
    assert parse_settings({**good(), "access": "public"}).access == "public"
    assert parse_settings({**good(), "access": "authenticated"}).access == "authenticated"


def test_dead_letter_is_on_unless_the_file_turns_it_off():
    assert parse_settings(good()).dead_letter is True
    assert parse_settings({**good(), "dead_letter": False}).dead_letter is False
    with pytest.raises(SettingsError, match="dead_letter must be true or false"):
        parse_settings({**good(), "dead_letter": "no"})


def test_the_markers_fields_but_the_ttl_field_are_exempt_from_indexing():
    """infra/firestore.tf's marker_unindexed_fields are every field store-inc-counter writes into a marker but
    the TTL field (exempt on its own resource, marker_ttl)."""
    tree = ast.parse((FUNCTIONS_DIR / "store_inc_counter.py").read_text())
    creates = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
               and getattr(node.func, "attr", None) == "create" and len(node.args) == 2
               and isinstance(node.args[1], ast.Dict)]
    assert len(creates) == 1, "store_inc_counter.py should create one marker document"
    keys = creates[0].args[1].keys
    named = {k.value for k in keys if isinstance(k, ast.Constant)}
    expiry = [ast.unparse(k) for k in keys if not isinstance(k, ast.Constant)]
    assert expiry == ["FIRESTORE['marker_expiry_field']"], expiry
    listed = re.search(r"marker_unindexed_fields = \[(.*?)\]", FIRESTORE_TF)
    assert listed, "infra/firestore.tf has no marker_unindexed_fields local"
    assert set(re.findall(r'"([^"]+)"', listed[1])) == named
    assert FIRESTORE["marker_expiry_field"] not in named


def test_a_puller_whose_cpu_is_left_out_is_counted_at_what_terraform_deploys():
    """infra/pull.tf deploys the puller with coalesce(cpu, DEFAULT): the kit's quota preflight, cost and twin
    count that, not a push function's 0.167 for concurrency 1."""
    deployed = re.search(r'puller_cpu\s*=\s*coalesce\(local\.store\.cpu,\s*"([0-9.]+)"\)',
                         (ROOT / "infra" / "pull.tf").read_text())
    assert deployed, "infra/pull.tf no longer says the puller's default cpu"
    raw = json.loads((ROOT / "iterations" / "iteration-7" / "settings.tfvars.json").read_text())
    del raw["functions"]["store-inc-counter"]["cpu"]
    raw["functions"]["store-inc-counter"]["memory"] = "512Mi"
    store = parse_settings(raw).functions["store-inc-counter"]
    assert store.effective_cpu == deployed[1]
    pushed = parse_settings({**raw, "store_mode": "push"}).functions["store-inc-counter"]
    assert pushed.effective_cpu == "0.167"  # a push store of concurrency 1 keeps Terraform's other default
