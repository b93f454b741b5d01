# Each iteration's settings file, planned with mocked providers: the knobs of
# the study (iterations 0 to 3) must reach the functions unchanged.
mock_provider "google" {}
mock_provider "archive" {}

variables {
  project_id = "visitkit-test"
}

# Reads iterations/iteration-N/settings.tfvars.json for the runs below
# (applied, as it holds no resources, so that OpenTofu passes its outputs on too).
run "settings" {
  command = apply
  module {
    source = "./tests/settings"
  }
}

run "iteration_0_no_cache_two_shards" {
  command = plan

  variables {
    shards_per_page   = run.settings.iterations["0"].shards_per_page
    cache_ttl_seconds = run.settings.iterations["0"].cache_ttl_seconds
    functions         = run.settings.iterations["0"].functions
  }

  assert {
    condition     = { for k, f in google_cloudfunctions2_function.this : k => f.service_config[0].max_instance_count } == { "serve-page" = 2, "get-counter" = 2, "inc-counter" = 2, "store-inc-counter" = 2 }
    error_message = "Iteration 0 runs every function on at most 2 instances."
  }
  assert {
    condition     = alltrue([for f in google_cloudfunctions2_function.this : f.service_config[0].max_instance_request_concurrency == 1])
    error_message = "Iteration 0 serves one request at a time per instance."
  }
  assert {
    condition     = alltrue([for f in google_cloudfunctions2_function.this : f.service_config[0].environment_variables.SHARDS_PER_PAGE == "2" && f.service_config[0].environment_variables.CACHE_TTL_SECONDS == "0"])
    error_message = "Iteration 0 has 2 shards per page and no get-counter cache."
  }
}

run "iteration_1_cache" {
  command = plan

  variables {
    shards_per_page   = run.settings.iterations["1"].shards_per_page
    cache_ttl_seconds = run.settings.iterations["1"].cache_ttl_seconds
    functions         = run.settings.iterations["1"].functions
  }

  assert {
    condition     = { for k, f in google_cloudfunctions2_function.this : k => f.service_config[0].max_instance_count } == { "serve-page" = 2, "get-counter" = 2, "inc-counter" = 2, "store-inc-counter" = 2 }
    error_message = "Iteration 1 runs every function on at most 2 instances."
  }
  assert {
    condition     = alltrue([for f in google_cloudfunctions2_function.this : f.service_config[0].max_instance_request_concurrency == 1])
    error_message = "Iteration 1 serves one request at a time per instance."
  }
  assert {
    condition     = alltrue([for f in google_cloudfunctions2_function.this : f.service_config[0].environment_variables.SHARDS_PER_PAGE == "2" && f.service_config[0].environment_variables.CACHE_TTL_SECONDS == "10"])
    error_message = "Iteration 1 has 2 shards per page and a 10 s get-counter cache."
  }
}

run "iteration_2_twenty_shards" {
  command = plan

  variables {
    shards_per_page   = run.settings.iterations["2"].shards_per_page
    cache_ttl_seconds = run.settings.iterations["2"].cache_ttl_seconds
    functions         = run.settings.iterations["2"].functions
  }

  assert {
    condition     = { for k, f in google_cloudfunctions2_function.this : k => f.service_config[0].max_instance_count } == { "serve-page" = 2, "get-counter" = 2, "inc-counter" = 2, "store-inc-counter" = 2 }
    error_message = "Iteration 2 runs every function on at most 2 instances."
  }
  assert {
    condition     = alltrue([for f in google_cloudfunctions2_function.this : f.service_config[0].max_instance_request_concurrency == 1])
    error_message = "Iteration 2 serves one request at a time per instance."
  }
  assert {
    condition     = alltrue([for f in google_cloudfunctions2_function.this : f.service_config[0].environment_variables.SHARDS_PER_PAGE == "20" && f.service_config[0].environment_variables.CACHE_TTL_SECONDS == "10"])
    error_message = "Iteration 2 has 20 shards per page and a 10 s get-counter cache."
  }
}

run "iteration_3_four_store_instances" {
  command = plan

  variables {
    shards_per_page   = run.settings.iterations["3"].shards_per_page
    cache_ttl_seconds = run.settings.iterations["3"].cache_ttl_seconds
    functions         = run.settings.iterations["3"].functions
  }

  assert {
    condition     = { for k, f in google_cloudfunctions2_function.this : k => f.service_config[0].max_instance_count } == { "serve-page" = 2, "get-counter" = 2, "inc-counter" = 2, "store-inc-counter" = 4 }
    error_message = "Iteration 3 gives store-inc-counter 4 instances and the others 2."
  }
  assert {
    condition     = alltrue([for f in google_cloudfunctions2_function.this : f.service_config[0].max_instance_request_concurrency == 1])
    error_message = "Iteration 3 serves one request at a time per instance."
  }
  assert {
    condition     = alltrue([for f in google_cloudfunctions2_function.this : f.service_config[0].environment_variables.SHARDS_PER_PAGE == "20" && f.service_config[0].environment_variables.CACHE_TTL_SECONDS == "10"])
    error_message = "Iteration 3 has 20 shards per page and a 10 s get-counter cache."
  }
}
