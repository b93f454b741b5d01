# store_mode = "pull" and page_embeds_count (iteration 7, issue 41), planned with mocked providers:
# the puller as a Cloud Run service, its pull subscription and grant, the environment, the batches'
# Firestore fields; push mode without any of it; and one rejected value per new validation message.
mock_provider "google" {}
mock_provider "archive" {}

variables {
  project_id = "visitkit-test"
}

# Iteration 7's own settings file, and pull-knobs.tfvars.json: the same store with non-default pull knobs,
# so that each knob is seen reaching the environment.
run "settings" {
  command = apply
  module {
    source = "./tests/settings"
  }
  variables {
    iterations = [7]
    fixtures   = ["pull-knobs"]
  }
}

run "iteration_7" {
  command = plan

  variables {
    shards_per_page   = run.settings.iterations["7"].shards_per_page
    cache_ttl_seconds = run.settings.iterations["7"].cache_ttl_seconds
    functions         = run.settings.iterations["7"].functions
    store_mode        = run.settings.iterations["7"].store_mode
    pull              = run.settings.iterations["7"].pull
    page_embeds_count = run.settings.iterations["7"].page_embeds_count
  }

  # Known at plan, so that the grants and the puller can be seen naming the store's own account.
  override_resource {
    target          = google_service_account.function["store-inc-counter"]
    override_during = plan
    values = {
      email  = "visitkit-store-inc-counter@visitkit-test.iam.gserviceaccount.com"
      member = "serviceAccount:visitkit-store-inc-counter@visitkit-test.iam.gserviceaccount.com"
    }
  }
  # And the build account, so that the puller's build command is known at plan.
  override_resource {
    target          = google_service_account.build
    override_during = plan
    values = {
      id     = "projects/visitkit-test/serviceAccounts/visitkit-build@visitkit-test.iam.gserviceaccount.com"
      email  = "visitkit-build@visitkit-test.iam.gserviceaccount.com"
      member = "serviceAccount:visitkit-build@visitkit-test.iam.gserviceaccount.com"
    }
  }

  # The puller replaces the store function.
  assert {
    condition     = toset(keys(google_cloudfunctions2_function.this)) == toset(["serve-page", "get-counter", "inc-counter"]) && length(google_cloud_run_v2_service.store_puller) == 1
    error_message = "In pull mode store-inc-counter is a Cloud Run service, the three others functions."
  }
  assert {
    condition     = google_cloud_run_v2_service.store_puller[0].name == "store-inc-counter" && google_cloud_run_v2_service.store_puller[0].ingress == "INGRESS_TRAFFIC_INTERNAL_ONLY"
    error_message = "The puller keeps the store's service name and takes internal traffic only."
  }
  assert {
    condition     = google_cloud_run_v2_service.store_puller[0].template[0].containers[0].resources[0].cpu_idle == false
    error_message = "The puller must be billed by instance (cpu_idle = false): its threads run between requests."
  }
  assert {
    condition     = google_cloud_run_v2_service.store_puller[0].template[0].containers[0].resources[0].limits == tomap({ cpu = try(run.settings.iterations["7"].functions["store-inc-counter"].cpu, "1"), memory = run.settings.iterations["7"].functions["store-inc-counter"].memory })
    error_message = "The puller runs on the settings' cpu (1 vCPU by default: instance-based billing's minimum) and memory."
  }
  assert {
    condition     = google_cloud_run_v2_service.store_puller[0].template[0].scaling[0].min_instance_count == 1 && google_cloud_run_v2_service.store_puller[0].template[0].scaling[0].max_instance_count == 1
    error_message = "The puller runs exactly one instance (min = max = 1)."
  }
  assert {
    condition     = one(google_cloud_run_v2_service.store_puller[0].template[0].containers[0].startup_probe[0].http_get[*].path) == "/"
    error_message = "The puller's HTTP startup probe asks for / (which starts the puller)."
  }
  assert {
    condition     = google_cloud_run_v2_service.store_puller[0].template[0].service_account == "visitkit-store-inc-counter@visitkit-test.iam.gserviceaccount.com"
    error_message = "The puller runs as store-inc-counter's own service account."
  }
  # Built from the functions' source, entry point and Python.
  assert {
    condition     = google_cloud_run_v2_service.store_puller[0].build_config[0].function_target == "store_inc_counter"
    error_message = "The puller's build_config names the store's entry point."
  }
  assert {
    condition     = google_cloud_run_v2_service.store_puller[0].build_config[0].source_location == "gs://${google_cloudfunctions2_function.this["inc-counter"].build_config[0].source[0].storage_source[0].bucket}/${google_cloudfunctions2_function.this["inc-counter"].build_config[0].source[0].storage_source[0].object}"
    error_message = "The puller is built from the source zip the functions deploy."
  }
  assert {
    condition     = endswith(google_cloud_run_v2_service.store_puller[0].build_config[0].base_image, "-docker.pkg.dev/serverless-runtimes/google-22/runtimes/${google_cloudfunctions2_function.this["inc-counter"].build_config[0].runtime}") && startswith(google_cloud_run_v2_service.store_puller[0].build_config[0].base_image, "southamerica-east1-")
    error_message = "The puller's base image is the functions' Python runtime, in the deployment's region."
  }
  assert {
    condition     = google_cloud_run_v2_service.store_puller[0].template[0].containers[0].image == google_cloud_run_v2_service.store_puller[0].build_config[0].image_uri && length(terraform_data.puller_image) == 1
    error_message = "The puller runs the image its build step makes."
  }
  # The image's build (issue 47): staged in our own bucket, logs in Cloud Logging, the functions' Python.
  assert {
    condition = alltrue([for flag in [
      "gcloud builds submit 'gs://visitkit-test-visitkit-source/functions-",
      "--config=/dev/stdin",
      "--project='visitkit-test' --region='southamerica-east1'",
      "--service-account='projects/visitkit-test/serviceAccounts/visitkit-build@visitkit-test.iam.gserviceaccount.com'",
      "--gcs-source-staging-dir='gs://visitkit-test-visitkit-source/staging'",
      "printf '%s' '${terraform_data.puller_image[0].input.build_config}' |",
    ] : strcontains(terraform_data.puller_image[0].input.command, flag)])
    error_message = "The puller's build stages its source in the kit's source bucket (the build account reads nothing else) and takes its build config on standard input."
  }
  assert {
    condition     = length(regexall("--pack|--default-buckets-behavior|--gcs-log-dir|_cloudbuild", terraform_data.puller_image[0].input.command)) == 0
    error_message = "No --pack (one env only), no default or regional cloudbuild bucket, no logs bucket the build account cannot write."
  }
  assert {
    condition     = jsondecode(terraform_data.puller_image[0].input.build_config).options == { logging = "CLOUD_LOGGING_ONLY" } && jsondecode(terraform_data.puller_image[0].input.build_config).images == [google_cloud_run_v2_service.store_puller[0].build_config[0].image_uri]
    error_message = "The build logs to Cloud Logging only (the build account's Logs Writer role) and pushes the image the puller runs."
  }
  assert {
    condition = jsondecode(terraform_data.puller_image[0].input.build_config).steps == [{
      name       = "gcr.io/k8s-skaffold/pack"
      entrypoint = "pack"
      args = ["build", google_cloud_run_v2_service.store_puller[0].build_config[0].image_uri, "--network", "cloudbuild",
        "--env", "GOOGLE_FUNCTION_TARGET=store_inc_counter", "--env", "GOOGLE_PYTHON_VERSION=3.12.x",
      "--builder", "gcr.io/buildpacks/builder:google-22"]
    }]
    error_message = "The build is gcloud's --pack build with the entry point and the functions' Python (python312: 3.12.x) on the google-22 builder."
  }
  assert {
    condition     = strcontains(google_cloud_run_v2_service.store_puller[0].build_config[0].base_image, "/serverless-runtimes/google-22/runtimes/python312")
    error_message = "The builder's stack (google-22) and Python are the base image's."
  }
  # Nobody invokes it.
  assert {
    condition     = length(google_cloud_run_v2_service_iam_member.push_invokes_store) == 0 && length(google_cloud_run_v2_service_iam_member.invoker) == 3 && length(google_service_account_iam_member.pubsub_agent_signs_push_tokens) == 0
    error_message = "Pull mode grants no push invoker and no push token signer."
  }
  # The page embeds its count: serve-page reads Firestore as get-counter does.
  assert {
    condition     = google_project_iam_member.this["serve-page-reads-firestore"].role == "roles/datastore.viewer" && length(google_project_iam_member.this) == 5
    error_message = "With page_embeds_count serve-page may read Firestore (roles/datastore.viewer), one project role more."
  }
  # The subscription: pull, same name and settings.
  assert {
    condition     = length(google_pubsub_subscription.store_inc_counter.push_config) == 0 && google_pubsub_subscription.store_inc_counter.name == "visits-store-inc-counter"
    error_message = "In pull mode store-inc-counter's subscription is a pull subscription of the same name."
  }
  assert {
    condition     = google_pubsub_subscription.store_inc_counter.ack_deadline_seconds == 60 && google_pubsub_subscription.store_inc_counter.message_retention_duration == "86400s" && google_pubsub_subscription.store_inc_counter.retry_policy[0].minimum_backoff == "10s" && google_pubsub_subscription.store_inc_counter.dead_letter_policy[0].max_delivery_attempts == 20
    error_message = "The pull subscription keeps the ack deadline, retention, retry and dead-letter settings."
  }
  assert {
    condition     = google_pubsub_subscription_iam_member.store_pulls[0].subscription == google_pubsub_subscription.store_inc_counter.name && google_pubsub_subscription_iam_member.store_pulls[0].role == "roles/pubsub.subscriber" && google_pubsub_subscription_iam_member.store_pulls[0].member == "serviceAccount:visitkit-store-inc-counter@visitkit-test.iam.gserviceaccount.com"
    error_message = "store-inc-counter's account may pull from its subscription (roles/pubsub.subscriber on it)."
  }
  # The environment.
  assert {
    condition = { for e in google_cloud_run_v2_service.store_puller[0].template[0].containers[0].env : e.name => e.value if contains(["STORE_MODE", "PAGE_EMBEDS_COUNT", "PULL_SUBSCRIPTION", "PULL_BATCH_SIZE", "PULL_FLUSH_MS", "DEDUP_WINDOW_MINUTES", "THREADS", "MARKER_TTL_DAYS"], e.name) } == {
      STORE_MODE    = "pull", PAGE_EMBEDS_COUNT = "1", PULL_SUBSCRIPTION = "visits-store-inc-counter", PULL_BATCH_SIZE = tostring(run.settings.iterations["7"].pull.batch_size),
      PULL_FLUSH_MS = tostring(run.settings.iterations["7"].pull.flush_ms), DEDUP_WINDOW_MINUTES = tostring(run.settings.iterations["7"].pull.dedup_window_minutes),
      THREADS       = tostring(run.settings.iterations["7"].functions["store-inc-counter"].concurrency), MARKER_TTL_DAYS = "7"
    }
    error_message = "The puller gets STORE_MODE, PAGE_EMBEDS_COUNT, its subscription and the pull knobs."
  }
  assert {
    condition     = alltrue([for f in google_cloudfunctions2_function.this : f.service_config[0].environment_variables.STORE_MODE == "pull" && f.service_config[0].environment_variables.PAGE_EMBEDS_COUNT == "1" && length([for k in keys(f.service_config[0].environment_variables) : k if startswith(k, "PULL_") || k == "DEDUP_WINDOW_MINUTES"]) == 0])
    error_message = "Every function gets STORE_MODE and PAGE_EMBEDS_COUNT; only the store the pull knobs."
  }
  # The batches' Firestore fields.
  assert {
    condition     = google_firestore_field.batch_ttl[0].collection == "visit_batches" && google_firestore_field.batch_ttl[0].field == "expire_at" && length(google_firestore_field.batch_ttl[0].ttl_config) == 1 && length(google_firestore_field.batch_ttl[0].index_config) == 1
    error_message = "visit_batches.expire_at has a TTL policy and no index."
  }
  assert {
    condition     = toset([for f in [google_firestore_field.batch_ids[0], google_firestore_field.batch_pages[0], google_firestore_field.batch_writer[0], google_firestore_field.batch_published_from[0]] : "${f.collection}.${f.field}" if length(f.index_config) == 1 && length(one(f.index_config).indexes) == 0]) == toset(["visit_batches.ids", "visit_batches.pages", "visit_batches.writer", "visit_batches.published_from"])
    error_message = "ids, pages, writer and published_from of visit_batches are exempt from indexing."
  }
  assert {
    condition     = google_firestore_field.marker_ttl.collection == "processed_messages" && length(google_firestore_field.marker_unindexed) == 1
    error_message = "The markers' fields are left as they are."
  }
  assert {
    condition     = endswith(google_logging_metric.store_deliveries.filter, "jsonPayload.message=\"visit batch\"")
    error_message = "In pull mode the store deliveries metric counts the puller's \"visit batch\" lines."
  }
}

run "pull_knobs_reach_the_store" {
  command = plan

  variables {
    shards_per_page   = run.settings.fixtures["pull-knobs"].shards_per_page
    cache_ttl_seconds = run.settings.fixtures["pull-knobs"].cache_ttl_seconds
    functions         = run.settings.fixtures["pull-knobs"].functions
    store_mode        = run.settings.fixtures["pull-knobs"].store_mode
    pull              = run.settings.fixtures["pull-knobs"].pull
    page_embeds_count = run.settings.fixtures["pull-knobs"].page_embeds_count
    topic_name        = "visits-7"
  }

  assert {
    condition = { for e in google_cloud_run_v2_service.store_puller[0].template[0].containers[0].env : e.name => e.value if contains(["PULL_SUBSCRIPTION", "PULL_BATCH_SIZE", "PULL_FLUSH_MS", "DEDUP_WINDOW_MINUTES"], e.name) } == {
      PULL_SUBSCRIPTION = "visits-7-store-inc-counter", PULL_BATCH_SIZE = "400", PULL_FLUSH_MS = "250", DEDUP_WINDOW_MINUTES = "90"
    }
    error_message = "Each pull knob, and the subscription's name, reach the puller's environment."
  }
  assert {
    condition     = google_pubsub_subscription.store_inc_counter.name == "visits-7-store-inc-counter"
    error_message = "PULL_SUBSCRIPTION names the subscription Terraform creates."
  }
}

# Push mode (iterations 0-6): none of it, and the new variables' defaults.
run "push_mode_has_none_of_it" {
  command = plan

  variables {
    shards_per_page   = 2
    cache_ttl_seconds = 10
    functions = {
      "serve-page"        = { max_instances = 2, concurrency = 1 }
      "get-counter"       = { max_instances = 2, concurrency = 1 }
      "inc-counter"       = { max_instances = 2, concurrency = 1 }
      "store-inc-counter" = { max_instances = 2, concurrency = 1 }
    }
  }

  assert {
    condition     = length(google_cloudfunctions2_function.this) == 4 && length(google_cloud_run_v2_service.store_puller) == 0 && length(terraform_data.puller_image) == 0
    error_message = "Push mode deploys four functions and no puller."
  }
  assert {
    condition     = length(google_pubsub_subscription.store_inc_counter.push_config) == 1 && length(google_cloud_run_v2_service_iam_member.push_invokes_store) == 1 && length(google_pubsub_subscription_iam_member.store_pulls) == 0
    error_message = "Push mode keeps the push subscription and its invoker, and grants no pull."
  }
  assert {
    condition     = alltrue([for f in google_cloudfunctions2_function.this : f.service_config[0].environment_variables.STORE_MODE == "push" && f.service_config[0].environment_variables.PAGE_EMBEDS_COUNT == "0" && length([for k in keys(f.service_config[0].environment_variables) : k if startswith(k, "PULL_") || k == "DEDUP_WINDOW_MINUTES"]) == 0])
    error_message = "Push mode: STORE_MODE push, PAGE_EMBEDS_COUNT 0, no pull knobs."
  }
  assert {
    condition     = length(concat(google_firestore_field.batch_ttl, google_firestore_field.batch_ids, google_firestore_field.batch_pages, google_firestore_field.batch_writer, google_firestore_field.batch_published_from)) == 0
    error_message = "Push mode creates no visit_batches field."
  }
  assert {
    condition     = endswith(google_logging_metric.store_deliveries.filter, "jsonPayload.message=\"visit message\"")
    error_message = "Push mode's store deliveries metric is unchanged."
  }
}

# --- Rejected values: one run per message ------------------------------------------

run "store_mode_unknown" {
  command = plan
  variables {
    shards_per_page   = 2
    cache_ttl_seconds = 10
    functions         = run.settings.iterations["7"].functions
    store_mode        = "poll"
  }
  expect_failures = [var.store_mode]
}

run "pull_batch_size_zero" {
  command = plan
  variables {
    shards_per_page   = 2
    cache_ttl_seconds = 10
    functions         = run.settings.iterations["7"].functions
    store_mode        = "pull"
    pull              = { batch_size = 0 }
  }
  expect_failures = [var.pull]
}

run "pull_flush_ms_too_long" {
  command = plan
  variables {
    shards_per_page   = 2
    cache_ttl_seconds = 10
    functions         = run.settings.iterations["7"].functions
    store_mode        = "pull"
    pull              = { flush_ms = 10001 }
  }
  expect_failures = [var.pull]
}

run "pull_dedup_window_fractional" {
  command = plan
  variables {
    shards_per_page   = 2
    cache_ttl_seconds = 10
    functions         = run.settings.iterations["7"].functions
    store_mode        = "pull"
    pull              = { dedup_window_minutes = 60.5 }
  }
  expect_failures = [var.pull]
}

run "pull_with_two_store_instances" {
  command = plan
  variables {
    shards_per_page   = 2
    cache_ttl_seconds = 10
    store_mode        = "pull"
    functions = {
      "serve-page"        = { max_instances = 2, concurrency = 1 }
      "get-counter"       = { max_instances = 2, concurrency = 1 }
      "inc-counter"       = { max_instances = 2, concurrency = 1 }
      "store-inc-counter" = { max_instances = 2, min_instances = 1, concurrency = 1 }
    }
  }
  expect_failures = [var.store_mode]
}

run "pull_without_a_warm_store" {
  command = plan
  variables {
    shards_per_page   = 2
    cache_ttl_seconds = 10
    store_mode        = "pull"
    functions = {
      "serve-page"        = { max_instances = 2, concurrency = 1 }
      "get-counter"       = { max_instances = 2, concurrency = 1 }
      "inc-counter"       = { max_instances = 2, concurrency = 1 }
      "store-inc-counter" = { max_instances = 1, concurrency = 1 }
    }
  }
  expect_failures = [var.store_mode]
}

run "page_embeds_count_null" {
  command = plan
  variables {
    shards_per_page   = 2
    cache_ttl_seconds = 10
    functions         = run.settings.iterations["7"].functions
    page_embeds_count = null
  }
  expect_failures = [var.page_embeds_count]
}

run "pull_store_below_one_cpu" {
  command = plan
  variables {
    shards_per_page   = 2
    cache_ttl_seconds = 10
    store_mode        = "pull"
    functions = {
      "serve-page"        = { max_instances = 2, concurrency = 1 }
      "get-counter"       = { max_instances = 2, concurrency = 1 }
      "inc-counter"       = { max_instances = 2, concurrency = 1 }
      "store-inc-counter" = { max_instances = 1, min_instances = 1, concurrency = 1, cpu = "0.5" }
    }
  }
  expect_failures = [google_cloud_run_v2_service.store_puller]
}
