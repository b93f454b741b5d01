# log_exclusions: exclusion filters on the _Default sink that drop a share of the successful request
# log entries and of store-inc-counter's counted lines, and nothing else; the log-based metrics stay
# project-scoped and unchanged; a pull store's batch metrics. tests/unit/test_log_exclusions.py evaluates the filters on sample entries.
mock_provider "google" {}
mock_provider "archive" {}

variables {
  project_id        = "visitkit-test"
  shards_per_page   = 2
  cache_ttl_seconds = 10
  functions = {
    "serve-page"        = { max_instances = 2, concurrency = 1 }
    "get-counter"       = { max_instances = 2, concurrency = 1 }
    "inc-counter"       = { max_instances = 2, concurrency = 1 }
    "store-inc-counter" = { max_instances = 2, concurrency = 1 }
  }
}

run "nothing_is_excluded_by_default" {
  command = plan

  assert {
    condition     = length(google_logging_project_exclusion.this) == 0
    error_message = "log_exclusions defaults to keeping every entry: no exclusion."
  }
}

run "the_metrics_count_what_they_counted" {
  command = plan

  assert {
    condition     = google_logging_metric.requests_429.filter == "resource.type=\"cloud_run_revision\" AND logName=\"projects/visitkit-test/logs/run.googleapis.com%2Frequests\" AND httpRequest.status=429 AND resource.labels.service_name=(\"get-counter\" OR \"inc-counter\" OR \"app\" OR \"store-inc-counter\")"
    error_message = "visitkit_requests_429's filter must stay the 429 request log entries of the four services."
  }
  assert {
    condition     = google_logging_metric.store_deliveries.filter == "resource.type=\"cloud_run_revision\" AND resource.labels.service_name=\"store-inc-counter\" AND jsonPayload.message=\"visit message\""
    error_message = "visitkit_store_deliveries's filter must stay every \"visit message\" line of store-inc-counter, whatever its outcome."
  }
  assert {
    condition     = google_logging_metric.requests_429.bucket_name == null && google_logging_metric.store_deliveries.bucket_name == null
    error_message = "Both metrics must be project-scoped: those count every entry the Logging API receives, the excluded ones too."
  }
  assert {
    condition     = length(google_logging_metric.store_batch_visits) == 0
    error_message = "A push store's lines are deliveries: no batch metric."
  }
}

# A pull store (iteration 7) logs one "visit batch" line per batch: four distributions sum the visits its
# lines' counts say, named after visitkit_store_deliveries (the runner finds them by its output).
run "a_pull_store_sums_its_batches_visits" {
  command = plan

  variables {
    store_mode = "pull"
    functions = {
      "serve-page"        = { max_instances = 2, concurrency = 1 }
      "get-counter"       = { max_instances = 2, concurrency = 1 }
      "inc-counter"       = { max_instances = 2, concurrency = 1 }
      "store-inc-counter" = { max_instances = 1, min_instances = 1, concurrency = 1 }
    }
  }

  assert {
    condition     = keys(google_logging_metric.store_batch_visits) == ["counted", "duplicates", "malformed", "nacked"] && alltrue([for count, metric in google_logging_metric.store_batch_visits : metric.name == "visitkit_store_deliveries_${count}"])
    error_message = "One metric per count of the batch line, named visitkit_store_deliveries_<count>."
  }
  assert {
    condition     = alltrue([for count, metric in google_logging_metric.store_batch_visits : metric.value_extractor == "EXTRACT(jsonPayload.${count})" && metric.metric_descriptor[0].metric_kind == "DELTA" && metric.metric_descriptor[0].value_type == "DISTRIBUTION" && length(metric.bucket_options) == 1 && metric.bucket_name == null])
    error_message = "Each is a project-scoped DELTA distribution of its count's value, with buckets."
  }
  assert {
    condition     = google_logging_metric.store_batch_visits["counted"].filter == "resource.type=\"cloud_run_revision\" AND resource.labels.service_name=\"store-inc-counter\" AND jsonPayload.message=\"visit batch\" AND jsonPayload.outcome=(\"committed\" OR \"nothing_to_count\")"
    error_message = "counted, duplicates and malformed are read from the lines of the batches that were acknowledged."
  }
  assert {
    condition     = google_logging_metric.store_batch_visits["nacked"].filter == "resource.type=\"cloud_run_revision\" AND resource.labels.service_name=\"store-inc-counter\" AND jsonPayload.message=\"visit batch\" AND jsonPayload.outcome=(\"failed\" OR \"lease_lost\")"
    error_message = "nacked is read from the lines of the batches sent back to Pub/Sub."
  }
  assert {
    condition     = google_logging_metric.store_deliveries.filter == "resource.type=\"cloud_run_revision\" AND resource.labels.service_name=\"store-inc-counter\" AND jsonPayload.message=\"visit batch\""
    error_message = "visitkit_store_deliveries still counts the batch lines by outcome (the failed-deliveries alert reads it)."
  }
}

run "both_shares" {
  command = plan

  variables {
    log_exclusions = { successful_requests_percent = 90, counted_deliveries_percent = 75 }
  }

  assert {
    condition     = keys(google_logging_project_exclusion.this) == ["visitkit-counted-deliveries", "visitkit-successful-requests"]
    error_message = "Each share above 0 makes one exclusion."
  }
  assert {
    condition     = google_logging_project_exclusion.this["visitkit-successful-requests"].filter == "resource.type=\"cloud_run_revision\" AND logName=\"projects/visitkit-test/logs/run.googleapis.com%2Frequests\" AND resource.labels.service_name=(\"get-counter\" OR \"inc-counter\" OR \"app\" OR \"store-inc-counter\") AND httpRequest.status>=200 AND httpRequest.status<400 AND sample(insertId, 0.9)"
    error_message = "The request exclusion drops 90% of the four services' 2xx and 3xx request log entries, and nothing else."
  }
  assert {
    condition     = google_logging_project_exclusion.this["visitkit-counted-deliveries"].filter == "resource.type=\"cloud_run_revision\" AND resource.labels.service_name=\"store-inc-counter\" AND jsonPayload.message=\"visit message\" AND jsonPayload.outcome=\"counted\" AND sample(insertId, 0.75)"
    error_message = "The line exclusion drops 75% of store-inc-counter's counted lines, and no other outcome."
  }
  assert {
    condition     = alltrue([for e in google_logging_project_exclusion.this : e.project == "visitkit-test" && e.disabled == null && strcontains(e.description, "%")])
    error_message = "The exclusions are the project's own, enabled, and say what they drop."
  }
  assert {
    condition     = alltrue([for e in google_logging_project_exclusion.this : !strcontains(e.filter, "429") && !strcontains(e.filter, "failed") && !strcontains(e.filter, ">=400")])
    error_message = "No exclusion names what must be kept (429s, failed lines, 4xx)."
  }
}

run "one_share_alone" {
  command = plan

  variables {
    log_exclusions = { counted_deliveries_percent = 99 }
  }

  assert {
    condition     = keys(google_logging_project_exclusion.this) == ["visitkit-counted-deliveries"] && endswith(google_logging_project_exclusion.this["visitkit-counted-deliveries"].filter, " AND sample(insertId, 0.99)")
    error_message = "successful_requests_percent left out is 0: only the line exclusion, at 99%."
  }
}

run "a_hundred_percent_drops_every_matching_entry" {
  command = plan

  variables {
    log_exclusions = { successful_requests_percent = 100, counted_deliveries_percent = 100 }
  }

  assert {
    condition     = length(google_logging_project_exclusion.this) == 2 && alltrue([for e in google_logging_project_exclusion.this : !strcontains(e.filter, "sample(")])
    error_message = "At 100% the filters drop every matching entry, with no sample term."
  }
}

run "negative_share" {
  command = plan
  variables {
    log_exclusions = { successful_requests_percent = -1 }
  }
  expect_failures = [var.log_exclusions]
}

run "share_above_100" {
  command = plan
  variables {
    log_exclusions = { counted_deliveries_percent = 101 }
  }
  expect_failures = [var.log_exclusions]
}

run "fractional_share" {
  command = plan
  variables {
    log_exclusions = { successful_requests_percent = 99.5 }
  }
  expect_failures = [var.log_exclusions]
}
