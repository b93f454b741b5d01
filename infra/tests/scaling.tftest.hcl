# scaling, the local twin's alone (scripts/visitkit/settings.py): a settings file that sets it plans, and Cloud Run
# autoscales each function between its min_instances and max_instances whatever it says; a value the twin does
# not know is refused here too, in the twin's words.
mock_provider "google" {}
mock_provider "archive" {}

variables {
  project_id = "visitkit-test"
}

run "settings" {
  command = apply
  module {
    source = "./tests/settings"
  }
  variables {
    iterations = []
    fixtures   = ["scaling-auto"]
  }
}

run "a_settings_file_with_scaling_auto_plans" {
  command = plan

  variables {
    shards_per_page   = run.settings.fixtures["scaling-auto"].shards_per_page
    cache_ttl_seconds = run.settings.fixtures["scaling-auto"].cache_ttl_seconds
    functions         = run.settings.fixtures["scaling-auto"].functions
    scaling           = run.settings.fixtures["scaling-auto"].scaling
  }

  assert {
    condition     = alltrue([for k, f in google_cloudfunctions2_function.this : f.service_config[0].min_instance_count == var.functions[k].min_instances && f.service_config[0].max_instance_count == var.functions[k].max_instances])
    error_message = "Cloud Run autoscales each function between its min_instances and max_instances, whatever scaling says."
  }
}

run "unknown_scaling" {
  command = plan

  variables {
    shards_per_page   = run.settings.fixtures["scaling-auto"].shards_per_page
    cache_ttl_seconds = run.settings.fixtures["scaling-auto"].cache_ttl_seconds
    functions         = run.settings.fixtures["scaling-auto"].functions
    scaling           = "elastic"
  }

  expect_failures = [var.scaling]
}
