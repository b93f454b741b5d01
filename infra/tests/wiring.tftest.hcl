# How the pieces connect: names, URLs, environment, triggers and who may
# invoke what. `command = apply` against the mocks (nothing leaves the process)
# gives every computed value, such as each function's Cloud Run service and
# each service account's email, a distinct made-up value to follow.
mock_provider "google" {}
mock_provider "archive" {}

variables {
  project_id        = "visitkit-test"
  region            = "southamerica-east1"
  shards_per_page   = 20
  cache_ttl_seconds = 10
  functions = {
    "serve-page"        = { max_instances = 2, concurrency = 1 }
    "get-counter"       = { max_instances = 3, concurrency = 8 }
    "inc-counter"       = { max_instances = 2, concurrency = 1, cpu = "0.333", memory = "512M", timeout_seconds = 30 }
    "store-inc-counter" = { max_instances = 4, concurrency = 1 }
  }
}


run "names_route_like_the_local_stack" {
  command = apply

  assert {
    condition     = { for k, f in google_cloudfunctions2_function.this : k => f.name } == { "serve-page" = "app", "get-counter" = "get-counter", "inc-counter" = "inc-counter", "store-inc-counter" = "store-inc-counter" }
    error_message = "Deployed names must be app, get-counter, inc-counter and store-inc-counter."
  }
  assert {
    condition     = output.base_url == "https://southamerica-east1-visitkit-test.cloudfunctions.net"
    error_message = "base_url must be https://REGION-PROJECT.cloudfunctions.net."
  }
  assert {
    condition     = { for k, f in google_cloudfunctions2_function.this : k => f.build_config[0].entry_point } == { "serve-page" = "serve_page", "get-counter" = "get_counter", "inc-counter" = "inc_counter", "store-inc-counter" = "store_inc_counter" }
    error_message = "Entry points must be the Python functions in functions/main.py."
  }
}

run "environment_comes_from_the_variables" {
  command = apply

  assert {
    condition = google_cloudfunctions2_function.this["serve-page"].service_config[0].environment_variables == tomap({
      GOOGLE_CLOUD_PROJECT = "visitkit-test"
      PUBSUB_TOPIC         = "visits"
      SHARDS_PER_PAGE      = "20"
      CACHE_TTL_SECONDS    = "10"
      MARKER_TTL_DAYS      = "7"
      INC_COUNTER_URL      = "https://southamerica-east1-visitkit-test.cloudfunctions.net/inc-counter"
      GET_COUNTER_URL      = "https://southamerica-east1-visitkit-test.cloudfunctions.net/get-counter"
    })
    error_message = "serve-page's environment is not the expected one."
  }
  assert {
    condition     = alltrue([for f in google_cloudfunctions2_function.this : f.service_config[0].environment_variables == google_cloudfunctions2_function.this["serve-page"].service_config[0].environment_variables])
    error_message = "All functions share one environment."
  }
}

run "sizes_and_limits_per_function" {
  command = apply

  assert {
    condition     = google_cloudfunctions2_function.this["get-counter"].service_config[0].max_instance_request_concurrency == 8 && google_cloudfunctions2_function.this["get-counter"].service_config[0].max_instance_count == 3
    error_message = "get-counter must get its own concurrency and max instances."
  }
  assert {
    condition     = google_cloudfunctions2_function.this["get-counter"].service_config[0].available_cpu == "1"
    error_message = "Concurrency above 1 without a cpu must default to 1 vCPU."
  }
  assert {
    condition     = google_cloudfunctions2_function.this["serve-page"].service_config[0].available_cpu == "0.167" && google_cloudfunctions2_function.this["serve-page"].service_config[0].available_memory == "256M" && google_cloudfunctions2_function.this["serve-page"].service_config[0].timeout_seconds == 60
    error_message = "Defaults are 0.167 vCPU, 256M and 60 s."
  }
  assert {
    condition     = google_cloudfunctions2_function.this["inc-counter"].service_config[0].available_cpu == "0.333" && google_cloudfunctions2_function.this["inc-counter"].service_config[0].available_memory == "512M" && google_cloudfunctions2_function.this["inc-counter"].service_config[0].timeout_seconds == 30
    error_message = "Given cpu, memory and timeout must be used as they are."
  }
}

run "store_inc_counter_is_triggered_not_public" {
  command = apply

  assert {
    condition     = { for k, m in google_cloud_run_v2_service_iam_member.public : k => m.name } == { for k in ["serve-page", "get-counter", "inc-counter"] : k => google_cloudfunctions2_function.this[k].service_config[0].service }
    error_message = "Exactly serve-page, get-counter and inc-counter are public."
  }
  assert {
    condition     = alltrue([for m in google_cloud_run_v2_service_iam_member.public : m.member == "allUsers" && m.role == "roles/run.invoker"])
    error_message = "Public functions are invokable by allUsers."
  }
  assert {
    condition     = google_cloud_run_v2_service_iam_member.eventarc_invokes_store.name == google_cloudfunctions2_function.this["store-inc-counter"].service_config[0].service && google_cloud_run_v2_service_iam_member.eventarc_invokes_store.member == google_service_account.eventarc.member
    error_message = "Only the Eventarc trigger's identity invokes store-inc-counter."
  }
  assert {
    condition     = { for k, f in google_cloudfunctions2_function.this : k => f.service_config[0].ingress_settings } == { "serve-page" = "ALLOW_ALL", "get-counter" = "ALLOW_ALL", "inc-counter" = "ALLOW_ALL", "store-inc-counter" = "ALLOW_INTERNAL_ONLY" }
    error_message = "Only store-inc-counter is closed to outside traffic."
  }
  assert {
    condition     = google_eventarc_trigger.store_inc_counter.destination[0].cloud_run_service[0].service == google_cloudfunctions2_function.this["store-inc-counter"].service_config[0].service
    error_message = "The trigger must deliver to store-inc-counter."
  }
  assert {
    condition     = one(google_eventarc_trigger.store_inc_counter.matching_criteria).value == "google.cloud.pubsub.topic.v1.messagePublished"
    error_message = "The trigger must fire on messages published to the topic."
  }
  assert {
    condition     = google_eventarc_trigger.store_inc_counter.service_account == google_service_account.eventarc.email
    error_message = "The trigger must run as its own identity, the only one allowed to invoke store-inc-counter."
  }
}

run "least_privilege" {
  command = apply

  assert {
    condition     = google_pubsub_topic_iam_member.inc_counter_publishes.role == "roles/pubsub.publisher" && google_pubsub_topic_iam_member.inc_counter_publishes.topic == "visits" && google_pubsub_topic_iam_member.inc_counter_publishes.member == google_service_account.function["inc-counter"].member
    error_message = "inc-counter may publish to the topic."
  }
  assert {
    condition     = google_project_iam_member.get_counter_reads_firestore.role == "roles/datastore.viewer" && google_project_iam_member.get_counter_reads_firestore.member == google_service_account.function["get-counter"].member
    error_message = "get-counter may only read Firestore."
  }
  assert {
    condition     = google_project_iam_member.store_inc_counter_writes_firestore.role == "roles/datastore.user" && google_project_iam_member.store_inc_counter_writes_firestore.member == google_service_account.function["store-inc-counter"].member
    error_message = "store-inc-counter may write Firestore."
  }
  assert {
    condition     = { for k, f in google_cloudfunctions2_function.this : k => f.service_config[0].service_account_email } == { for k, sa in google_service_account.function : k => sa.email }
    error_message = "Each function runs as its own service account."
  }
  assert {
    condition     = length(distinct([for sa in google_service_account.function : sa.email])) == 4
    error_message = "Functions must not share a service account."
  }
  assert {
    condition     = !contains([google_pubsub_topic_iam_member.inc_counter_publishes.member, google_project_iam_member.get_counter_reads_firestore.member, google_project_iam_member.store_inc_counter_writes_firestore.member, google_cloud_run_v2_service_iam_member.eventarc_invokes_store.member], google_service_account.function["serve-page"].member)
    error_message = "serve-page needs no role."
  }
}
