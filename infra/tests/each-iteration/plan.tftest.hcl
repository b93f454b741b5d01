# Plans one iteration's settings file, given with -var-file: scripts/check-infra runs this once for every
# iterations/*/settings.tfvars.json it finds (a tuned iteration too), so that no hand-kept list leaves one out.
# What each asserts holds for any settings: the knobs reach the functions unchanged.
mock_provider "google" {}
mock_provider "archive" {}

variables {
  project_id = "visitkit-test"
}

run "plans" {
  command = plan

  assert {
    condition     = alltrue([for k, f in google_cloudfunctions2_function.this : f.service_config[0].max_instance_count == var.functions[k].max_instances && f.service_config[0].max_instance_request_concurrency == var.functions[k].concurrency])
    error_message = "Each function's max_instances and concurrency reach its deployment."
  }
  assert {
    condition     = alltrue([for f in google_cloudfunctions2_function.this : f.service_config[0].environment_variables.SHARDS_PER_PAGE == tostring(var.shards_per_page) && f.service_config[0].environment_variables.CACHE_TTL_SECONDS == tostring(var.cache_ttl_seconds)])
    error_message = "Every function gets the iteration's shards per page and cache TTL."
  }
}
