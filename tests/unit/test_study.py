"""A run beside what the study measured on Google Cloud."""
import dataclasses
import json

from fakes import a_summary

from visitkit.reports import study


def test_a_run_is_shown_beside_the_study_and_a_none_profile_run_says_it_is_not_comparable(tmp_path):
    (tmp_path / "study.json").write_text(json.dumps({"knee_users": 60, "first_failure_users": 150}))
    figures = study.load(tmp_path)
    run = a_summary(target="local", profile={"name": "study"},
                    headline={"knee_users": 59, "first_failure_users": 209})
    assert study.comparison_line(figures, run) == (
        "  the study on Google Cloud: knee ~60 users, first failures ~150 users; this run: knee 59 users, "
        "first failures 209 users")
    none = dataclasses.replace(run, profile={"name": "none"}, headline={"knee_users": 722, "first_failure_users": None})
    line = study.comparison_line(figures, none)
    assert "this run: knee 722 users, no failure (profile none: this machine's figures, not comparable" in line
    assert study.load(tmp_path / "elsewhere") is None
