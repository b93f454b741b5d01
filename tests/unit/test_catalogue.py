"""The one catalogue of functions and pages: everything that names them reads it."""
import ast
import json
import re

import pytest

import locustfile
from visitkit import catalogue
from visitkit.twin import haproxy
from visitkit.cloud import monitoring
from visitkit.paths import CATALOGUE_FILE, ROOT


def test_the_visitor_visits_exactly_the_catalogue_pages():
    assert {task.__name__ for task in locustfile.Visitor.tasks} == set(catalogue.PAGES)


def test_the_functions_read_the_same_pages():
    import common

    assert common.PAGES == catalogue.PAGES and common.FIRESTORE == catalogue.FIRESTORE


def test_public_paths_are_the_deployed_names():
    assert catalogue.PUBLIC_PATHS == {"/app": "serve-page", "/get-counter": "get-counter",
                                      "/inc-counter": "inc-counter"}
    assert catalogue.PUSH_FUNCTION == "store-inc-counter"
    assert catalogue.function_of_path("/get-counter?visit_type=home") == "get-counter"
    assert monitoring.SERVICE_NAMES["serve-page"] == "app"


def test_entry_points_exist_in_the_functions_main_module():
    import main

    for function in catalogue.CATALOGUE.values():
        assert callable(getattr(main, function.entry_point))


def test_haproxy_routes_every_public_function_and_only_those():
    text = haproxy.render_config(public_port=1, push_port=2, stats_address="127.0.0.1:3", errorfile_path="x",
                                 instances={}, settings=None, queue_timeout=1)
    routed = dict(re.findall(r"use_backend (\S+) if \{ path (\S+) \}", text))
    assert {path: name for name, path in routed.items()} == catalogue.PUBLIC_PATHS


def test_terraform_reads_the_catalogue_rather_than_repeating_it():
    infra_tf = "\n".join(path.read_text() for path in sorted((ROOT / "infra").glob("*.tf")))
    assert "catalogue.json" in infra_tf
    for function in catalogue.CATALOGUE.values():
        assert not re.search(rf'=\s*"{function.entry_point}"', infra_tf), f"infra/*.tf spells out {function.entry_point}"
    assert not re.search(r'=\s*"processed_messages"', infra_tf)


def test_each_role_is_one_function_and_the_kit_names_them_by_role():
    assert sorted(catalogue.ROLES) == ["page", "publisher", "reader", "store"]
    assert len(catalogue.ROLES) == len(catalogue.CATALOGUE)
    assert not catalogue.CATALOGUE[catalogue.PUSH_FUNCTION].public  # only Pub/Sub's push reaches the store
    for module in ("cloud/monitoring", "twin/haproxy", "twin/profile", "model/capacity", "results/summary", "settings",
                   "reports/compare", "cloud/gcp", "runs/targets"):
        tree = ast.parse((ROOT / "scripts" / "visitkit" / f"{module}.py").read_text())
        named = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)} & set(catalogue.FUNCTIONS)
        assert not named, f"{module}.py spells out {named}"


def test_a_catalogue_whose_roles_are_not_one_function_each_or_whose_store_is_public_is_refused():
    functions = json.loads(CATALOGUE_FILE.read_text())["functions"]
    assert catalogue.roles(functions) == catalogue.ROLES

    def changed(name, **fields):  # the catalogue with one function changed, or one more
        return {**functions, name: {**functions["get-counter"], **functions.get(name, {}), **fields}}

    for bad, problem in ((changed("get-counter", role="page"), "2 functions have role page"),
                         (changed("get-counter", role="cache"), "0 functions have role reader"),
                         (changed("extra", role="cache"), "extra's role 'cache'"),
                         (changed("get-counter", public=False), "get-counter (reader) is not public"),
                         (changed("store-inc-counter", public=True), "store-inc-counter (store) is public")):
        with pytest.raises(ValueError, match=re.escape(problem)):
            catalogue.roles(bad)
