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

run "iteration_4_eighty_per_instance" {
  command = plan

  variables {
    shards_per_page   = run.settings.iterations["4"].shards_per_page
    cache_ttl_seconds = run.settings.iterations["4"].cache_ttl_seconds
    functions         = run.settings.iterations["4"].functions
  }

  assert {
    condition     = { for k, f in google_cloudfunctions2_function.this : k => f.service_config[0].max_instance_count } == { "serve-page" = 2, "get-counter" = 2, "inc-counter" = 2, "store-inc-counter" = 4 }
    error_message = "Iteration 4 keeps iteration 3's instance budget."
  }
  assert {
    condition     = alltrue([for f in google_cloudfunctions2_function.this : f.service_config[0].max_instance_request_concurrency == 80 && f.service_config[0].available_cpu == "1"])
    error_message = "Iteration 4 serves 80 requests at once per instance, on 1 vCPU (concurrency above 1 needs it)."
  }
  assert {
    condition     = alltrue([for f in google_cloudfunctions2_function.this : f.service_config[0].environment_variables.SHARDS_PER_PAGE == "200"])
    error_message = "Iteration 4 has 200 shards per page."
  }
}

run "iteration_5_ten_thousand_visits_per_second" {
  command = plan

  variables {
    shards_per_page   = run.settings.iterations["5"].shards_per_page
    cache_ttl_seconds = run.settings.iterations["5"].cache_ttl_seconds
    functions         = run.settings.iterations["5"].functions
    subscription      = run.settings.iterations["5"].subscription
  }

  assert {
    condition     = { for k, f in google_cloudfunctions2_function.this : k => f.service_config[0].max_instance_count } == { "serve-page" = 20, "get-counter" = 20, "inc-counter" = 30, "store-inc-counter" = 40 }
    error_message = "Iteration 5 plans 20, 20, 30 and 40 instances."
  }
  assert {
    condition     = alltrue([for f in google_cloudfunctions2_function.this : f.service_config[0].max_instance_request_concurrency == 80 && f.service_config[0].available_cpu == "1"])
    error_message = "Iteration 5 serves 80 requests at once per instance, on 1 vCPU."
  }
  assert {
    condition     = google_pubsub_subscription.store_inc_counter.dead_letter_policy[0].max_delivery_attempts == 20
    error_message = "Iteration 5 keeps 20 delivery attempts before the dead-letter topic."
  }
  assert {
    condition     = alltrue([for f in google_cloudfunctions2_function.this : f.service_config[0].environment_variables.SHARDS_PER_PAGE == "5000"])
    error_message = "Iteration 5 has 5,000 shards per page."
  }
}

run "iteration_6_the_knee_for_less" {
  command = plan

  variables {
    shards_per_page   = run.settings.iterations["6"].shards_per_page
    cache_ttl_seconds = run.settings.iterations["6"].cache_ttl_seconds
    functions         = run.settings.iterations["6"].functions
  }

  assert {
    condition     = { for k, f in google_cloudfunctions2_function.this : k => f.service_config[0].max_instance_count } == { "serve-page" = 2, "get-counter" = 2, "inc-counter" = 2, "store-inc-counter" = 3 }
    error_message = "Iteration 6 keeps iteration 4's instances but one store-inc-counter instance fewer."
  }
  assert {
    condition     = { for k, f in google_cloudfunctions2_function.this : k => f.service_config[0].available_memory } == { "serve-page" = "128Mi", "get-counter" = "256M", "inc-counter" = "256M", "store-inc-counter" = "256M" }
    error_message = "Iteration 6 gives serve-page the 128 MiB tier, the others the default."
  }
  assert {
    condition     = alltrue([for f in google_cloudfunctions2_function.this : f.service_config[0].max_instance_request_concurrency == 80 && f.service_config[0].available_cpu == "1" && f.service_config[0].environment_variables.SHARDS_PER_PAGE == "1000"])
    error_message = "Iteration 6 serves 80 requests at once per instance on 1 vCPU, with 1,000 shards per page."
  }
}
