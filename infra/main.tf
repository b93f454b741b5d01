locals {
  # Deployed names make https://REGION-PROJECT.cloudfunctions.net/NAME route like the
  # local stack: /app (serve-page), /get-counter, /inc-counter.
  deployed_names = {
    "serve-page"        = "app"
    "get-counter"       = "get-counter"
    "inc-counter"       = "inc-counter"
    "store-inc-counter" = "store-inc-counter"
  }
  entry_points = {
    "serve-page"        = "serve_page"
    "get-counter"       = "get_counter"
    "inc-counter"       = "inc_counter"
    "store-inc-counter" = "store_inc_counter"
  }
  # store-inc-counter is reached only through its Eventarc trigger.
  public_functions = toset(["serve-page", "get-counter", "inc-counter"])

  base_url = "https://${var.region}-${var.project_id}.cloudfunctions.net"

  # Known before anything exists, so serve-page can point at its siblings
  # without a dependency on their resources (the same for_each block).
  function_urls = { for key, name in local.deployed_names : key => "${local.base_url}/${name}" }

  # All functions live in one main.py and share one environment.
  environment = {
    GOOGLE_CLOUD_PROJECT = var.project_id
    PUBSUB_TOPIC         = google_pubsub_topic.visits.name
    SHARDS_PER_PAGE      = tostring(var.shards_per_page)
    CACHE_TTL_SECONDS    = tostring(var.cache_ttl_seconds)
    MARKER_TTL_DAYS      = tostring(var.marker_ttl_days)
    INC_COUNTER_URL      = local.function_urls["inc-counter"]
    GET_COUNTER_URL      = local.function_urls["get-counter"]
  }

  # Below 1 vCPU a 2nd gen function serves one request at a time.
  cpu = { for key, f in var.functions : key => coalesce(f.cpu, f.concurrency > 1 ? "1" : "0.167") }

  services = toset([
    "artifactregistry.googleapis.com",
    "cloudbuild.googleapis.com",
    "cloudfunctions.googleapis.com",
    "eventarc.googleapis.com",
    "firestore.googleapis.com",
    "iam.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "pubsub.googleapis.com",
    "run.googleapis.com",
    "storage.googleapis.com",
  ])
}

resource "google_project_service" "this" {
  for_each = local.services

  project = var.project_id
  service = each.value
  # Other things in the project may use these APIs: destroy leaves them on.
  disable_on_destroy = false
}

# --- Data ----------------------------------------------------------------------

resource "google_firestore_database" "default" {
  project     = var.project_id
  name        = "(default)" # the client libraries' default, which the functions use
  location_id = var.region
  type        = "FIRESTORE_NATIVE"
  # `terraform destroy` really deletes the counters, so the next deployment starts from zero.
  deletion_policy         = "DELETE"
  delete_protection_state = "DELETE_PROTECTION_DISABLED"

  depends_on = [google_project_service.this]
}

# Dedup markers expire by themselves after MARKER_TTL_DAYS.
resource "google_firestore_field" "marker_ttl" {
  project    = var.project_id
  database   = google_firestore_database.default.name
  collection = "processed_messages"
  field      = "expire_at"

  ttl_config {}
  # No single-field indexes on a TTL timestamp: they are never queried and
  # would only slow down writes.
  index_config {}
}

# --- Messaging -----------------------------------------------------------------

resource "google_pubsub_topic" "visits" {
  # checkov:skip=CKV_GCP_83: visit events are not sensitive; Google-managed encryption is enough for a load test.
  project = var.project_id
  name    = var.topic_name

  depends_on = [google_project_service.this]
}

# No dead-letter topic: Eventarc creates and owns the push subscription, and
# neither google_eventarc_trigger nor Cloud Functions can set its dead-letter
# policy; an out-of-band change would drift from this configuration. Failed
# deliveries are retried with backoff for the subscription's retention (24 h),
# which is what the study measures as backlog. See README.md.
resource "google_eventarc_trigger" "store_inc_counter" {
  project         = var.project_id
  name            = "store-inc-counter"
  location        = var.region
  service_account = google_service_account.eventarc.email

  matching_criteria {
    attribute = "type"
    value     = "google.cloud.pubsub.topic.v1.messagePublished"
  }

  transport {
    pubsub {
      topic = google_pubsub_topic.visits.id
    }
  }

  destination {
    cloud_run_service {
      service = google_cloudfunctions2_function.this["store-inc-counter"].service_config[0].service
      region  = var.region
    }
  }

  # The trigger may only deliver once its identity can invoke the function.
  depends_on = [google_cloud_run_v2_service_iam_member.eventarc_invokes_store]
}

# --- Function source -----------------------------------------------------------

resource "google_storage_bucket" "source" {
  # checkov:skip=CKV_GCP_62: access logs of a bucket holding only our own zipped source add cost, not insight.
  # checkov:skip=CKV_GCP_78: each upload has its own content-addressed name; versioning would only keep garbage.
  project                     = var.project_id
  name                        = "${var.project_id}-visitkit-source"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = true # destroy must not stop at old source zips

  depends_on = [google_project_service.this]
}

data "archive_file" "functions" {
  type        = "zip"
  source_dir  = "${path.module}/../functions"
  output_path = "${path.module}/../build/functions.zip"
  excludes    = ["**/__pycache__", "**/*.pyc"]
}

resource "google_storage_bucket_object" "functions" {
  # A new name for new content makes the functions redeploy.
  name   = "functions-${data.archive_file.functions.output_md5}.zip"
  bucket = google_storage_bucket.source.name
  source = data.archive_file.functions.output_path
}

# --- Functions -----------------------------------------------------------------

resource "google_cloudfunctions2_function" "this" {
  # checkov:skip=CKV_GCP_124: serve-page, get-counter and inc-counter are the public website (ALLOW_ALL by design); store-inc-counter is ALLOW_INTERNAL_ONLY.
  for_each = var.functions

  project     = var.project_id
  name        = local.deployed_names[each.key]
  location    = var.region
  description = "Visit counter: ${each.key}"

  build_config {
    runtime     = "python312"
    entry_point = local.entry_points[each.key]
    source {
      storage_source {
        bucket = google_storage_bucket.source.name
        object = google_storage_bucket_object.functions.name
      }
    }
  }

  service_config {
    max_instance_count               = each.value.max_instances
    max_instance_request_concurrency = each.value.concurrency
    available_memory                 = each.value.memory
    available_cpu                    = local.cpu[each.key]
    timeout_seconds                  = each.value.timeout_seconds
    environment_variables            = local.environment
    service_account_email            = google_service_account.function[each.key].email
    all_traffic_on_latest_revision   = true
    # Eventarc's Pub/Sub deliveries in the same project count as internal traffic.
    ingress_settings = contains(local.public_functions, each.key) ? "ALLOW_ALL" : "ALLOW_INTERNAL_ONLY"
  }

  depends_on = [google_project_service.this]
}

# --- Identities and access -----------------------------------------------------

resource "google_service_account" "function" {
  for_each = var.functions

  project      = var.project_id
  account_id   = "visitkit-${local.deployed_names[each.key]}"
  display_name = "Visit counter ${each.key} function"

  depends_on = [google_project_service.this]
}

resource "google_service_account" "eventarc" {
  project      = var.project_id
  account_id   = "visitkit-eventarc"
  display_name = "Visit counter Eventarc trigger of store-inc-counter"

  depends_on = [google_project_service.this]
}

# serve-page gets no role at all.
resource "google_pubsub_topic_iam_member" "inc_counter_publishes" {
  project = var.project_id
  topic   = google_pubsub_topic.visits.name
  role    = "roles/pubsub.publisher"
  member  = google_service_account.function["inc-counter"].member
}

# Firestore access is granted on the project: Firestore has no finer IAM resource.
resource "google_project_iam_member" "get_counter_reads_firestore" {
  project = var.project_id
  role    = "roles/datastore.viewer"
  member  = google_service_account.function["get-counter"].member
}

# datastore.user is the narrowest predefined role that can write entities
# (it also reads them, which the dedup check needs).
resource "google_project_iam_member" "store_inc_counter_writes_firestore" {
  project = var.project_id
  role    = "roles/datastore.user"
  member  = google_service_account.function["store-inc-counter"].member
}

# 2nd gen functions are Cloud Run services: invocation is run.invoker on them.
resource "google_cloud_run_v2_service_iam_member" "public" {
  for_each = local.public_functions

  project  = var.project_id
  location = var.region
  name     = google_cloudfunctions2_function.this[each.key].service_config[0].service
  role     = "roles/run.invoker"
  member   = "allUsers"
}

resource "google_cloud_run_v2_service_iam_member" "eventarc_invokes_store" {
  project  = var.project_id
  location = var.region
  name     = google_cloudfunctions2_function.this["store-inc-counter"].service_config[0].service
  role     = "roles/run.invoker"
  member   = google_service_account.eventarc.member
}
