"""A command line as a results folder keeps it (visitkit.paths.recorded_command): no machine's folders in a record."""
import sys

from visitkit.paths import ROOT, from_root, recorded_command


def test_a_command_is_kept_with_this_python_as_python_and_the_checkouts_paths_from_its_root():
    command = [sys.executable, "-m", "locust", "-f", str(ROOT / "locust" / "locustfile.py"), "--csv",
               str(ROOT / "iterations" / "iteration-0" / "results" / "load-1" / "locust"), "--host", "http://127.0.0.1:80"]
    assert recorded_command(command) == ["python", "-m", "locust", "-f", "locust/locustfile.py", "--csv",
                                         "iterations/iteration-0/results/load-1/locust", "--host", "http://127.0.0.1:80"]


def test_a_path_outside_the_checkout_is_kept_as_it_is():
    assert recorded_command(["/usr/bin/env", "relative/path"]) == ["/usr/bin/env", "relative/path"]
    assert from_root(ROOT / "studies" / "x") == "studies/x"
