# How the pieces connect: names, URLs, environment, the push subscription and
# who may invoke what. `command = apply` against the mocks (nothing leaves the
# process) gives every computed value, such as each function's Cloud Run service
# and each service account's email, a distinct made-up value to follow.
mock_provider "google" {
  # The project number names Pub/Sub's service agent.
  mock_data "google_project" {
    defaults = {
      number = "123456789012"
    }
  }
}
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
  # The apply runs below would otherwise really sleep (terraform_data.build_grants_wait's
  # local-exec); build.tftest.hcl tests the wait.
  build_grants_wait_seconds = 0
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
    error_message = "Entry points must be the Python functions of functions/: one module per function (serve_page.py, get_counter.py, inc_counter.py, store_inc_counter.py), each imported by main.py when its entry point is asked for."
  }
  assert {
    condition     = { for k, f in google_cloudfunctions2_function.this : k => f.name } == { for k, f in jsondecode(file("../functions/catalogue.json")).functions : k => f.service }
    error_message = "Deployed names must come from functions/catalogue.json."
  }
  assert {
    condition     = google_firestore_field.marker_ttl.collection == "processed_messages" && google_firestore_field.marker_ttl.field == "expire_at"
    error_message = "The TTL policy must be on the dedup markers' expiry field named in functions/catalogue.json."
  }
}

# A marker (processed_messages/<sha256 of the visit id>: visit_type and expire_at) writes no
# single-field index entry: every one of its fields is exempt.
run "markers_write_no_index_entries" {
  command = plan

  assert {
    condition     = keys(google_firestore_field.marker_unindexed) == ["visit_type"]
    error_message = "Every field of a marker but its TTL field (visit_type) must have an index exemption of its own."
  }
  assert {
    condition     = alltrue([for f in concat(values(google_firestore_field.marker_unindexed), [google_firestore_field.marker_ttl]) : f.collection == "processed_messages" && f.database == "(default)" && length(f.index_config) == 1 && length(f.index_config[0].indexes) == 0])
    error_message = "Each marker field's index_config must be empty (no single-field index at all), in the markers' collection group of the (default) database."
  }
  assert {
    condition     = alltrue([for f in values(google_firestore_field.marker_unindexed) : length(f.ttl_config) == 0])
    error_message = "Only expire_at carries the TTL policy."
  }
  assert {
    condition     = toset(concat(keys(google_firestore_field.marker_unindexed), [google_firestore_field.marker_ttl.field])) == toset(["visit_type", "expire_at"])
    error_message = "Together the exemptions must cover exactly the fields store-inc-counter writes into a marker."
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
      CORS_ALLOWED_ORIGINS = ""
      PAGE_IDLE_SECONDS    = "600"
      THREADS              = "1"
      STORE_MODE           = "push"
      PAGE_EMBEDS_COUNT    = "0"
    })
    error_message = "serve-page's environment is not the expected one."
  }
  assert {
    condition     = alltrue([for f in google_cloudfunctions2_function.this : { for k, v in f.service_config[0].environment_variables : k => v if !contains(["THREADS", "CORS_ALLOWED_ORIGINS", "PAGE_IDLE_SECONDS"], k) } == { for k, v in google_cloudfunctions2_function.this["serve-page"].service_config[0].environment_variables : k => v if !contains(["THREADS", "CORS_ALLOWED_ORIGINS", "PAGE_IDLE_SECONDS"], k) }])
    error_message = "All functions share one environment, THREADS, CORS_ALLOWED_ORIGINS and PAGE_IDLE_SECONDS aside."
  }
  assert {
    condition     = { for k, f in google_cloudfunctions2_function.this : k => lookup(f.service_config[0].environment_variables, "PAGE_IDLE_SECONDS", "(unset)") } == { "serve-page" = "600", "get-counter" = "(unset)", "inc-counter" = "(unset)", "store-inc-counter" = "(unset)" }
    error_message = "serve-page alone gets PAGE_IDLE_SECONDS, 600 by default."
  }
  assert {
    condition     = google_cloudfunctions2_function.this["serve-page"].service_config[0].environment_variables.CACHE_TTL_SECONDS == "10"
    error_message = "serve-page gets CACHE_TTL_SECONDS too: its page re-reads every max(its refresh, the cache TTL)."
  }
  assert {
    condition     = { for k, f in google_cloudfunctions2_function.this : k => lookup(f.service_config[0].environment_variables, "CORS_ALLOWED_ORIGINS", "(unset)") } == { "serve-page" = "", "get-counter" = "", "inc-counter" = "", "store-inc-counter" = "(unset)" }
    error_message = "By default the three public functions get an empty CORS_ALLOWED_ORIGINS (no cross-origin caller) and store-inc-counter none."
  }
  assert {
    condition     = { for k, f in google_cloudfunctions2_function.this : k => f.service_config[0].environment_variables.THREADS } == { "serve-page" = "1", "get-counter" = "8", "inc-counter" = "1", "store-inc-counter" = "1" }
    error_message = "Each function's THREADS must be its concurrency, so gunicorn serves what the platform sends (not its cpu_count x 4 default)."
  }
}

run "cors_allowed_origins_reach_the_public_functions" {
  command = plan

  variables {
    cors_allowed_origins = ["https://www.example.com", "https://app.example.org:8443"]
  }

  assert {
    condition     = alltrue([for k in ["serve-page", "get-counter", "inc-counter"] : google_cloudfunctions2_function.this[k].service_config[0].environment_variables.CORS_ALLOWED_ORIGINS == "https://www.example.com,https://app.example.org:8443"])
    error_message = "The allow-list reaches the public functions as one comma-separated CORS_ALLOWED_ORIGINS, in order."
  }
  assert {
    condition     = !contains(keys(google_cloudfunctions2_function.this["store-inc-counter"].service_config[0].environment_variables), "CORS_ALLOWED_ORIGINS")
    error_message = "store-inc-counter, which no browser calls, gets no CORS_ALLOWED_ORIGINS."
  }
}

run "page_idle_seconds_reaches_serve_page_alone" {
  command = plan

  variables {
    page_idle_seconds = 0
  }

  assert {
    condition     = { for k, f in google_cloudfunctions2_function.this : k => lookup(f.service_config[0].environment_variables, "PAGE_IDLE_SECONDS", "(unset)") } == { "serve-page" = "0", "get-counter" = "(unset)", "inc-counter" = "(unset)", "store-inc-counter" = "(unset)" }
    error_message = "page_idle_seconds (0: never stop) reaches serve-page's PAGE_IDLE_SECONDS, and no other function."
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

run "store_inc_counter_is_pushed_not_public" {
  command = apply

  assert {
    condition     = toset([for m in google_cloud_run_v2_service_iam_member.invoker : "${m.name} ${m.member}"]) == toset([for k in ["serve-page", "get-counter", "inc-counter"] : "${google_cloudfunctions2_function.this[k].service_config[0].service} allUsers"])
    error_message = "By default (access = public) exactly serve-page, get-counter and inc-counter are invokable by allUsers."
  }
  assert {
    condition     = alltrue([for m in google_cloud_run_v2_service_iam_member.invoker : m.role == "roles/run.invoker"])
    error_message = "Invokers get roles/run.invoker."
  }
  assert {
    condition     = !contains([for m in google_cloud_run_v2_service_iam_member.invoker : m.name], google_cloudfunctions2_function.this["store-inc-counter"].service_config[0].service)
    error_message = "store-inc-counter must not be public."
  }
  assert {
    condition     = google_cloud_run_v2_service_iam_member.push_invokes_store[0].name == google_cloudfunctions2_function.this["store-inc-counter"].service_config[0].service && google_cloud_run_v2_service_iam_member.push_invokes_store[0].role == "roles/run.invoker" && google_cloud_run_v2_service_iam_member.push_invokes_store[0].member == google_service_account.push.member
    error_message = "The push account invokes store-inc-counter."
  }
  assert {
    condition     = !contains(concat([for sa in google_service_account.function : sa.member], [google_service_account.build.member]), google_service_account.push.member)
    error_message = "The push account is its own identity, shared with no function and not the build."
  }
  assert {
    condition     = { for k, f in google_cloudfunctions2_function.this : k => f.service_config[0].ingress_settings } == { "serve-page" = "ALLOW_ALL", "get-counter" = "ALLOW_ALL", "inc-counter" = "ALLOW_ALL", "store-inc-counter" = "ALLOW_INTERNAL_ONLY" }
    error_message = "Only store-inc-counter is closed to outside traffic."
  }
}

run "authenticated_access_grants_only_the_invokers" {
  command = apply

  variables {
    access   = "authenticated"
    invokers = ["user:tester@example.com", "serviceAccount:loadgen@visitkit-test.iam.gserviceaccount.com"]
  }

  assert {
    condition = toset([for m in google_cloud_run_v2_service_iam_member.invoker : "${m.name} ${m.member}"]) == toset(flatten([
      for k in ["serve-page", "get-counter", "inc-counter"] : [
        "${google_cloudfunctions2_function.this[k].service_config[0].service} user:tester@example.com",
        "${google_cloudfunctions2_function.this[k].service_config[0].service} serviceAccount:loadgen@visitkit-test.iam.gserviceaccount.com",
      ]
    ]))
    error_message = "With access = authenticated each HTTP function is invokable by each listed principal."
  }
  assert {
    condition     = alltrue([for m in google_cloud_run_v2_service_iam_member.invoker : !contains(["allUsers", "allAuthenticatedUsers"], m.member) && m.role == "roles/run.invoker"])
    error_message = "With access = authenticated nothing is granted to allUsers or allAuthenticatedUsers."
  }
  assert {
    condition     = google_cloud_run_v2_service_iam_member.push_invokes_store[0].member == google_service_account.push.member && google_cloudfunctions2_function.this["store-inc-counter"].service_config[0].ingress_settings == "ALLOW_INTERNAL_ONLY"
    error_message = "The store path does not change with access."
  }
  assert {
    condition     = output.function_audiences == { for k, f in google_cloudfunctions2_function.this : k => f.service_config[0].uri } && alltrue([for k, audience in output.function_audiences : audience != google_cloudfunctions2_function.this[k].url])
    error_message = "function_audiences must give each function's Cloud Run service URL (service_config[0].uri, its run.app URL), the audience the kit mints its ID tokens for, not its cloudfunctions.net URL."
  }
}

run "a_user_login_gets_a_load_generator_account_to_act_as" {
  command = apply

  variables {
    access               = "authenticated"
    invokers             = ["user:tester@example.com"]
    load_generator_users = ["user:tester@example.com"]
  }

  assert {
    condition     = length(google_service_account.load_generator) == 1 && google_service_account.load_generator[0].account_id == "visitkit-loadgen" && output.load_generator_service_account == google_service_account.load_generator[0].email
    error_message = "A load-generator account is created, and named in the outputs, when users are to act as it."
  }
  assert {
    condition     = [for m in google_service_account_iam_member.load_generator_users : "${m.service_account_id} ${m.role} ${m.member}"] == ["${google_service_account.load_generator[0].name} roles/iam.serviceAccountOpenIdTokenCreator user:tester@example.com"]
    error_message = "Each listed user may mint the load generator's ID tokens (OpenID token creator on that account only)."
  }
  assert {
    condition     = length([for m in google_cloud_run_v2_service_iam_member.invoker : m if m.member == "serviceAccount:visitkit-loadgen@visitkit-test.iam.gserviceaccount.com"]) == 3 && length(google_cloud_run_v2_service_iam_member.invoker) == 6
    error_message = "The load generator and the invokers may invoke the three HTTP functions."
  }
  assert {
    condition     = contains(keys(google_project_service.this), "iamcredentials.googleapis.com")
    error_message = "The IAM Credentials API mints the load generator's tokens."
  }
}

run "public_access_creates_no_load_generator" {
  command = plan

  variables {
    load_generator_users = ["user:tester@example.com"]
  }

  assert {
    condition     = length(google_service_account.load_generator) == 0 && length(google_service_account_iam_member.load_generator_users) == 0
    error_message = "With access = public there is no load generator."
  }
}

run "authenticated_access_without_invokers_plans" {
  # A plain `terraform apply -var-file=...` of an authenticated iteration: no binding at all,
  # so only principals whose project roles include run.routes.invoke may call the functions.
  command = plan

  variables {
    access = "authenticated"
  }

  assert {
    condition     = length(google_cloud_run_v2_service_iam_member.invoker) == 0
    error_message = "Without invokers an authenticated deployment grants run.invoker to nobody."
  }
}

run "min_instances_reach_the_functions" {
  command = plan

  variables {
    functions = {
      "serve-page"        = { max_instances = 2, concurrency = 1 }
      "get-counter"       = { max_instances = 3, concurrency = 8, min_instances = 1 }
      "inc-counter"       = { max_instances = 2, concurrency = 1 }
      "store-inc-counter" = { max_instances = 4, concurrency = 1, min_instances = 4 }
    }
  }

  assert {
    condition     = { for k, f in google_cloudfunctions2_function.this : k => f.service_config[0].min_instance_count } == { "serve-page" = 0, "get-counter" = 1, "inc-counter" = 0, "store-inc-counter" = 4 }
    error_message = "min_instances must reach each function (default 0)."
  }
}

run "subscription_pushes_to_store_inc_counter" {
  command = apply

  assert {
    condition     = google_pubsub_subscription.store_inc_counter.topic == google_pubsub_topic.visits.id
    error_message = "The subscription must be on the visits topic."
  }
  assert {
    condition     = google_pubsub_subscription.store_inc_counter.push_config[0].push_endpoint == google_cloudfunctions2_function.this["store-inc-counter"].service_config[0].uri
    error_message = "The subscription must push to store-inc-counter's Cloud Run URL."
  }
  assert {
    condition     = google_pubsub_subscription.store_inc_counter.push_config[0].oidc_token[0].service_account_email == google_service_account.push.email && google_pubsub_subscription.store_inc_counter.push_config[0].oidc_token[0].audience == google_cloudfunctions2_function.this["store-inc-counter"].service_config[0].uri
    error_message = "Pushes must carry an OIDC token of the push account, for store-inc-counter's URL."
  }
  assert {
    condition     = google_pubsub_subscription.store_inc_counter.ack_deadline_seconds == 60 && google_pubsub_subscription.store_inc_counter.message_retention_duration == "86400s"
    error_message = "Defaults: 60 s ack deadline (and push timeout), 1 day retention."
  }
  assert {
    condition     = google_pubsub_subscription.store_inc_counter.retry_policy[0].minimum_backoff == "10s" && google_pubsub_subscription.store_inc_counter.retry_policy[0].maximum_backoff == "600s"
    error_message = "Default backoff: 10 s to 600 s."
  }
  assert {
    condition     = google_pubsub_subscription.store_inc_counter.dead_letter_policy[0].max_delivery_attempts == 20
    error_message = "Default: 20 delivery attempts before dead lettering."
  }
  assert {
    condition     = google_pubsub_subscription.store_inc_counter.expiration_policy[0].ttl == "" && google_pubsub_subscription.dead_letter[0].expiration_policy[0].ttl == ""
    error_message = "Neither subscription may expire."
  }
  assert {
    condition     = output.subscription_name == google_pubsub_subscription.store_inc_counter.name && output.push_service_account == google_service_account.push.email
    error_message = "Outputs must name the managed subscription and the push account."
  }
}

run "subscription_settings_from_the_variable" {
  command = apply

  variables {
    subscription = {
      ack_deadline_seconds      = 120
      minimum_backoff_seconds   = 5
      maximum_backoff_seconds   = 300
      max_delivery_attempts     = 50
      message_retention_seconds = 3600
    }
  }

  assert {
    condition     = google_pubsub_subscription.store_inc_counter.ack_deadline_seconds == 120 && google_pubsub_subscription.store_inc_counter.message_retention_duration == "3600s"
    error_message = "ack_deadline_seconds and message_retention_seconds must reach the subscription."
  }
  assert {
    condition     = google_pubsub_subscription.store_inc_counter.retry_policy[0].minimum_backoff == "5s" && google_pubsub_subscription.store_inc_counter.retry_policy[0].maximum_backoff == "300s"
    error_message = "The backoff must reach the subscription's retry policy."
  }
  assert {
    condition     = google_pubsub_subscription.store_inc_counter.dead_letter_policy[0].max_delivery_attempts == 50
    error_message = "max_delivery_attempts must reach the dead-letter policy."
  }
}

run "subscription_partial_settings_keep_defaults" {
  command = apply

  variables {
    subscription = { max_delivery_attempts = 30 }
  }

  assert {
    condition     = google_pubsub_subscription.store_inc_counter.dead_letter_policy[0].max_delivery_attempts == 30 && google_pubsub_subscription.store_inc_counter.ack_deadline_seconds == 60 && google_pubsub_subscription.store_inc_counter.retry_policy[0].maximum_backoff == "600s"
    error_message = "Settings left out keep their defaults."
  }
}

run "dead_letter_wiring" {
  command = apply

  assert {
    condition     = google_pubsub_subscription.store_inc_counter.dead_letter_policy[0].dead_letter_topic == google_pubsub_topic.dead_letter[0].id && google_pubsub_topic.dead_letter[0].name == "visits-dead-letter"
    error_message = "By default (dead_letter = true) failed visits go to their own dead-letter topic."
  }
  assert {
    condition     = google_pubsub_subscription.dead_letter[0].topic == google_pubsub_topic.dead_letter[0].id && length(google_pubsub_subscription.dead_letter[0].push_config) == 0 && google_pubsub_subscription.dead_letter[0].name == "visits-dead-letter-pull"
    error_message = "The dead-letter topic has its own pull subscription."
  }
  assert {
    condition     = google_pubsub_topic_iam_member.pubsub_agent_dead_letters[0].topic == google_pubsub_topic.dead_letter[0].name && google_pubsub_topic_iam_member.pubsub_agent_dead_letters[0].role == "roles/pubsub.publisher" && google_pubsub_topic_iam_member.pubsub_agent_dead_letters[0].member == "serviceAccount:service-123456789012@gcp-sa-pubsub.iam.gserviceaccount.com"
    error_message = "Pub/Sub's service agent may publish to the dead-letter topic."
  }
  assert {
    condition     = google_pubsub_subscription_iam_member.pubsub_agent_acks_dead_letters[0].subscription == google_pubsub_subscription.store_inc_counter.name && google_pubsub_subscription_iam_member.pubsub_agent_acks_dead_letters[0].role == "roles/pubsub.subscriber" && google_pubsub_subscription_iam_member.pubsub_agent_acks_dead_letters[0].member == "serviceAccount:service-123456789012@gcp-sa-pubsub.iam.gserviceaccount.com"
    error_message = "Pub/Sub's service agent may acknowledge on the store subscription."
  }
  assert {
    condition     = google_service_account_iam_member.pubsub_agent_signs_push_tokens[0].service_account_id == google_service_account.push.name && google_service_account_iam_member.pubsub_agent_signs_push_tokens[0].role == "roles/iam.serviceAccountTokenCreator" && google_service_account_iam_member.pubsub_agent_signs_push_tokens[0].member == "serviceAccount:service-123456789012@gcp-sa-pubsub.iam.gserviceaccount.com"
    error_message = "Pub/Sub's service agent may mint tokens for the push account only."
  }
  assert {
    condition     = alltrue([for m in google_project_iam_member.this : !endswith(m.member, "@gcp-sa-pubsub.iam.gserviceaccount.com")])
    error_message = "Pub/Sub's service agent gets nothing project-wide."
  }
  assert {
    condition     = output.dead_letter_topic_name == google_pubsub_topic.dead_letter[0].name && output.dead_letter_subscription_name == google_pubsub_subscription.dead_letter[0].name
    error_message = "Outputs must name the dead-letter topic and its subscription."
  }
}

# dead_letter = false: for an organization whose iam.allowedPolicyMemberDomains refuses grants to
# Google's service agents. Applied against the mocks so that every member is known.
run "without_dead_letter_no_grant_names_pubsubs_agent" {
  command = apply

  variables {
    dead_letter = false
    access      = "authenticated"
    invokers    = ["user:tester@example.com"]
  }

  assert {
    condition     = length(google_pubsub_subscription.store_inc_counter.dead_letter_policy) == 0
    error_message = "With dead_letter = false the push subscription has no dead-letter policy."
  }
  assert {
    condition     = length(google_pubsub_topic.dead_letter) == 0 && length(google_pubsub_subscription.dead_letter) == 0
    error_message = "With dead_letter = false there is no dead-letter topic or pull subscription (nothing would reach them)."
  }
  assert {
    condition     = length(google_pubsub_topic_iam_member.pubsub_agent_dead_letters) == 0 && length(google_pubsub_subscription_iam_member.pubsub_agent_acks_dead_letters) == 0 && length(google_service_account_iam_member.pubsub_agent_signs_push_tokens) == 0
    error_message = "With dead_letter = false none of the three grants to Pub/Sub's service agent is made."
  }
  assert {
    # Every IAM member resource of the module, whatever it grants on.
    condition = alltrue([for member in concat(
      [for m in google_project_iam_member.this : m.member],
      [for m in google_pubsub_topic_iam_member.pubsub_agent_dead_letters : m.member],
      [google_pubsub_topic_iam_member.inc_counter_publishes.member],
      [for m in google_pubsub_subscription_iam_member.pubsub_agent_acks_dead_letters : m.member],
      [for m in google_service_account_iam_member.pubsub_agent_signs_push_tokens : m.member],
      [for m in google_service_account_iam_member.load_generator_users : m.member],
      [for m in google_cloud_run_v2_service_iam_member.invoker : m.member],
      [for m in google_cloud_run_v2_service_iam_member.push_invokes_store : m.member],
      [for m in google_pubsub_subscription_iam_member.store_pulls : m.member],
      [google_storage_bucket_iam_member.build_source_objects.member],
      [google_artifact_registry_repository_iam_member.build_pushes_images.member],
    ) : !strcontains(member, "gcp-sa-pubsub")])
    error_message = "With dead_letter = false no grant names Pub/Sub's service agent."
  }
  assert {
    condition     = length(google_cloud_run_v2_service_iam_member.invoker) == 3 && length(regexall("resource\\s+\"google_[a-z0-9_]+_iam_(member|binding|policy)\"", join("\n", [for f in fileset(".", "*.tf") : file(f)]))) == 11
    error_message = "A .tf file has an IAM resource the assertion above does not list: add it there."
  }
  assert {
    condition     = output.dead_letter_topic_name == null && output.dead_letter_subscription_name == null && output.alert_policies.dead_letter_backlog == null
    error_message = "Outputs naming the dead-letter topic, its subscription and its alert are null."
  }
  assert {
    condition     = google_pubsub_subscription.store_inc_counter.push_config[0].oidc_token[0].service_account_email == google_service_account.push.email && google_pubsub_subscription.store_inc_counter.message_retention_duration == "86400s"
    error_message = "The push subscription still pushes with the push account's token; failing messages are kept for message_retention_seconds."
  }
}

run "least_privilege" {
  command = apply

  # Every project-wide binding is an instance of google_project_iam_member.this (no other
  # project IAM resource in any .tf file), and each holds a role of this allow-list (never
  # editor, owner or anything broader).
  assert {
    condition     = length(google_project_iam_member.this) == 4 && length(regexall("resource\\s+\"google_project_iam_(member|binding|policy)\"", join("\n", [for f in fileset(".", "*.tf") : file(f)]))) == 1
    error_message = "Project-wide roles are granted only through google_project_iam_member.this (local.project_roles in iam.tf)."
  }
  assert {
    condition = alltrue([for m in google_project_iam_member.this : contains([
      "roles/datastore.viewer",
      "roles/datastore.user",
      "roles/logging.logWriter",
      "roles/storage.objectAdmin",
    ], m.role)])
    error_message = "A project-wide role outside the allow-list was granted."
  }
  assert {
    condition     = alltrue([for m in google_project_iam_member.this : !contains(["roles/editor", "roles/owner", "roles/viewer"], m.role) && m.member != "allUsers" && m.member != "allAuthenticatedUsers"])
    error_message = "No basic role and nothing public at the project level."
  }
  assert {
    condition = toset([for m in google_project_iam_member.this : "${m.role} ${m.member}"]) == toset([
      "roles/datastore.viewer ${google_service_account.function["get-counter"].member}",
      "roles/datastore.user ${google_service_account.function["store-inc-counter"].member}",
      "roles/logging.logWriter ${google_service_account.build.member}",
      "roles/storage.objectAdmin ${google_service_account.build.member}",
    ])
    error_message = "Project-wide: get-counter reads Firestore, store-inc-counter writes it, the build writes logs and handles the function source in gcf-v2-sources; nothing else."
  }
  assert {
    condition     = one(google_project_iam_member.this["build-gcf-sources"].condition).expression == "resource.name.startsWith(\"projects/_/buckets/gcf-v2-sources-123456789012-southamerica-east1\")"
    error_message = "The build's Storage Object Admin at the project level holds only on Cloud Functions' source bucket of this project and region."
  }
  assert {
    condition     = alltrue([for m in google_project_iam_member.this : length(m.condition) == 1 if startswith(m.role, "roles/storage.")])
    error_message = "No storage role is granted project-wide without a condition."
  }
  # The build account's grants as Google documents them for a custom build account
  # (https://cloud.google.com/functions/docs/securing/build-custom-sa,
  # https://cloud.google.com/run/docs/configuring/services/build-service-account): Logs Writer,
  # Artifact Registry Writer and Storage Object Admin, each on the narrowest resource it may be
  # granted on.
  assert {
    condition     = google_project_iam_member.this["build-writes-logs"].role == "roles/logging.logWriter" && google_project_iam_member.this["build-writes-logs"].member == google_service_account.build.member && length(google_project_iam_member.this["build-writes-logs"].condition) == 0
    error_message = "The build account writes its logs (roles/logging.logWriter on the project: Cloud Logging has nothing finer)."
  }
  assert {
    condition     = google_storage_bucket_iam_member.build_source_objects.bucket == google_storage_bucket.source.name && google_storage_bucket_iam_member.build_source_objects.role == "roles/storage.objectAdmin" && google_storage_bucket_iam_member.build_source_objects.member == google_service_account.build.member
    error_message = "The build account gets Storage Object Admin on our source bucket, on the bucket only."
  }
  assert {
    condition = toset(flatten([
      [for m in google_project_iam_member.this : m.role if m.member == google_service_account.build.member],
      [google_storage_bucket_iam_member.build_source_objects.role, google_artifact_registry_repository_iam_member.build_pushes_images.role],
    ])) == toset(["roles/logging.logWriter", "roles/artifactregistry.writer", "roles/storage.objectAdmin"])
    error_message = "The build account holds exactly the three roles Google lists for a custom build account."
  }
  assert {
    condition     = google_artifact_registry_repository_iam_member.build_pushes_images.repository == google_artifact_registry_repository.functions.name && google_artifact_registry_repository_iam_member.build_pushes_images.role == "roles/artifactregistry.writer" && google_artifact_registry_repository_iam_member.build_pushes_images.member == google_service_account.build.member
    error_message = "The build account writes images to the functions' own repository only."
  }
  assert {
    condition     = alltrue([for f in google_cloudfunctions2_function.this : f.build_config[0].docker_repository == google_artifact_registry_repository.functions.id]) && google_artifact_registry_repository.functions.format == "DOCKER"
    error_message = "Every function's image goes to the functions' own Docker repository."
  }
  assert {
    condition     = google_pubsub_topic_iam_member.inc_counter_publishes.role == "roles/pubsub.publisher" && google_pubsub_topic_iam_member.inc_counter_publishes.topic == "visits" && google_pubsub_topic_iam_member.inc_counter_publishes.member == google_service_account.function["inc-counter"].member
    error_message = "inc-counter may publish to the topic."
  }
  assert {
    condition     = alltrue([for f in google_cloudfunctions2_function.this : f.build_config[0].service_account == google_service_account.build.id])
    error_message = "Every function must be built by the build account."
  }
  assert {
    condition     = { for k, f in google_cloudfunctions2_function.this : k => f.service_config[0].service_account_email } == { for k, sa in google_service_account.function : k => sa.email }
    error_message = "Each function runs as its own service account."
  }
  assert {
    condition     = length(distinct(concat([for sa in google_service_account.function : sa.email], [google_service_account.build.email, google_service_account.push.email]))) == 6
    error_message = "Functions, the build and the push must not share a service account."
  }
  assert {
    condition     = !contains(concat([for m in google_project_iam_member.this : m.member], [google_pubsub_topic_iam_member.inc_counter_publishes.member, google_cloud_run_v2_service_iam_member.push_invokes_store[0].member, google_storage_bucket_iam_member.build_source_objects.member]), google_service_account.function["serve-page"].member)
    error_message = "serve-page needs no role."
  }
}

run "apis_for_a_new_project" {
  command = apply

  assert {
    condition = toset(keys(google_project_service.this)) == toset([
      "artifactregistry.googleapis.com",
      "cloudbuild.googleapis.com",
      "cloudfunctions.googleapis.com",
      "cloudresourcemanager.googleapis.com",
      "firestore.googleapis.com",
      "iam.googleapis.com",
      "iamcredentials.googleapis.com",
      "logging.googleapis.com",
      "monitoring.googleapis.com",
      "pubsub.googleapis.com",
      "run.googleapis.com",
      "storage.googleapis.com",
    ])
    error_message = "The APIs enabled must be exactly those the resources need, Cloud Resource Manager included and Eventarc not."
  }
  assert {
    condition     = alltrue([for s in google_project_service.this : s.disable_on_destroy == false])
    error_message = "Destroy must leave the APIs on."
  }
}

run "log_metrics_for_the_runner" {
  command = apply

  assert {
    condition     = strcontains(google_logging_metric.requests_429.filter, "resource.type=\"cloud_run_revision\"") && strcontains(google_logging_metric.requests_429.filter, "httpRequest.status=429") && strcontains(google_logging_metric.requests_429.filter, "run.googleapis.com%2Frequests")
    error_message = "The 429 metric counts Cloud Run request log entries with status 429."
  }
  assert {
    condition     = alltrue([for name in ["app", "get-counter", "inc-counter", "store-inc-counter"] : strcontains(google_logging_metric.requests_429.filter, "\"${name}\"")])
    error_message = "The 429 metric covers the four functions' services."
  }
  assert {
    condition     = google_logging_metric.requests_429.label_extractors == tomap({ service_name = "EXTRACT(resource.labels.service_name)" }) && one(google_logging_metric.requests_429.metric_descriptor[0].labels).key == "service_name"
    error_message = "The 429 metric is labelled by Cloud Run service."
  }
  assert {
    condition     = strcontains(google_logging_metric.store_deliveries.filter, "resource.labels.service_name=\"store-inc-counter\"") && strcontains(google_logging_metric.store_deliveries.filter, "jsonPayload.message=\"visit message\"")
    error_message = "The deliveries metric counts store-inc-counter's \"visit message\" log lines."
  }
  assert {
    condition     = google_logging_metric.store_deliveries.label_extractors == tomap({ outcome = "EXTRACT(jsonPayload.outcome)" }) && one(google_logging_metric.store_deliveries.metric_descriptor[0].labels).key == "outcome"
    error_message = "The deliveries metric is labelled by outcome."
  }
  assert {
    condition     = alltrue([for outcome in ["counted", "already_counted", "malformed", "failed"] : strcontains(one(google_logging_metric.store_deliveries.metric_descriptor[0].labels).description, outcome) && strcontains(google_logging_metric.store_deliveries.description, outcome)])
    error_message = "The deliveries metric names its four outcomes, failed (Firestore failed, Pub/Sub redelivers) included."
  }
  assert {
    condition     = output.requests_429_metric_name == google_logging_metric.requests_429.name && output.store_deliveries_metric_name == google_logging_metric.store_deliveries.name
    error_message = "Outputs must name both log metrics."
  }
}
