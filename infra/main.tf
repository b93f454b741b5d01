locals {
  # functions/catalogue.json is shared with the Python side (the functions and the local
  # stack): the pages, each function's entry point, Cloud Run service name and whether it is
  # public, and the Firestore names. Terraform takes the deployed names from it.
  catalogue = jsondecode(file("${path.module}/../functions/catalogue.json"))

  # Deployed names make https://REGION-PROJECT.cloudfunctions.net/NAME route like the
  # local stack: /app (serve-page), /get-counter, /inc-counter.
  deployed_names = { for key, f in local.catalogue.functions : key => f.service }
  entry_points   = { for key, f in local.catalogue.functions : key => f.entry_point }
  # store-inc-counter is reached only through the push subscription.
  public_functions = toset([for key, f in local.catalogue.functions : key if f.public])

  base_url = "https://${var.region}-${var.project_id}.cloudfunctions.net"

  # edge_protection puts a load balancer in front of the public functions (below): visitors then
  # reach them on its address, over HTTPS on edge_protection.domain when set, plain HTTP otherwise.
  edge       = var.edge_protection.enabled
  edge_https = local.edge && var.edge_protection.domain != ""
  public_base_url = !local.edge ? local.base_url : (
    local.edge_https ? "https://${var.edge_protection.domain}" : "http://${one(google_compute_global_address.edge[*].address)}"
  )

  # Known before anything exists, so serve-page can point at its siblings
  # without a dependency on their resources (the same for_each block); behind the load balancer,
  # its address (which depends on no function).
  function_urls = { for key, name in local.deployed_names : key => "${local.public_base_url}/${name}" }

  # All functions live in one main.py and share one environment, but for THREADS, the public
  # functions' CORS_ALLOWED_ORIGINS and serve-page's PAGE_IDLE_SECONDS (below).
  environment = {
    GOOGLE_CLOUD_PROJECT = var.project_id
    PUBSUB_TOPIC         = google_pubsub_topic.visits.name
    SHARDS_PER_PAGE      = tostring(var.shards_per_page)
    CACHE_TTL_SECONDS    = tostring(var.cache_ttl_seconds)
    MARKER_TTL_DAYS      = tostring(var.marker_ttl_days)
    INC_COUNTER_URL      = local.function_urls["inc-counter"]
    GET_COUNTER_URL      = local.function_urls["get-counter"]
  }

  # The public functions also get CORS_ALLOWED_ORIGINS: the other sites whose pages may call
  # them, comma-separated ("" for none), which the functions' CORS handling reads.
  public_environment = { CORS_ALLOWED_ORIGINS = join(",", var.cors_allowed_origins) }

  # serve-page (the catalogue's "page" role) alone also gets PAGE_IDLE_SECONDS: how long a page nobody
  # touches keeps re-reading its count (0: for ever). It reads every max(its refresh, CACHE_TTL_SECONDS),
  # so CACHE_TTL_SECONDS above matters to it too.
  page_environment = { PAGE_IDLE_SECONDS = tostring(var.page_idle_seconds) }

  # functions-framework runs gunicorn with THREADS threads (its default is cpu_count x 4):
  # Google's concurrency guidance for Python is to match the function's concurrency, so an
  # instance serves exactly the requests the platform sends it, as the local twin does.
  function_environment = { for key, f in var.functions : key => merge(
    local.environment,
    contains(local.public_functions, key) ? local.public_environment : {},
    try(local.catalogue.functions[key].role, "") == "page" ? local.page_environment : {},
    { THREADS = tostring(f.concurrency) },
  ) }

  # access = "auto" is resolved by the kit's runner, which reads the organization policy and
  # passes -var=access=public or -var=access=authenticated itself. Terraform alone (a manual plan
  # or destroy with an iteration's settings file that says "auto") treats it as "public". Every
  # use of the access setting goes through this local.
  access = var.access == "auto" ? "public" : var.access

  # Who invokes the three HTTP functions: everyone, or (access = "authenticated") each listed
  # principal and the load-generator account, one binding per function and principal.
  load_generator  = local.access == "authenticated" && length(var.load_generator_users) > 0
  public_invokers = local.access == "public" ? ["allUsers"] : concat(var.invokers, local.load_generator ? ["serviceAccount:visitkit-loadgen@${var.project_id}.iam.gserviceaccount.com"] : [])
  invoker_bindings = { for pair in setproduct(local.public_functions, local.public_invokers) :
  "${pair[0]} ${pair[1]}" => { function = pair[0], member = pair[1] } }

  # Below 1 vCPU a 2nd gen function serves one request at a time.
  # variables.tf repeats this rule in its Cloud Run CPU/memory validations: keep both in step.
  cpu = { for key, f in var.functions : key => coalesce(f.cpu, f.concurrency > 1 ? "1" : "0.167") }

  # Every API a resource below needs. cloudresourcemanager serves the project's IAM policy and
  # data.google_project; it is off in some new projects.
  services = toset(concat([
    "artifactregistry.googleapis.com",
    "cloudbuild.googleapis.com",
    "cloudfunctions.googleapis.com",
    "cloudresourcemanager.googleapis.com",
    "firestore.googleapis.com",
    "iam.googleapis.com",
    # iamcredentials mints the load generator's ID tokens when a user acts as a service account.
    "iamcredentials.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "pubsub.googleapis.com",
    "run.googleapis.com",
    "storage.googleapis.com",
    ],
    # The load balancer, Cloud Armor and the address are Compute Engine resources.
    local.edge ? ["compute.googleapis.com"] : [],
  ))

  # Pub/Sub's service agent: it pushes to store-inc-counter (with the push account's OIDC
  # token) and moves failed messages to the dead-letter topic. Named in grants only with
  # dead_letter = true (below).
  pubsub_service_agent = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"

  # Every project-wide role the kit grants, in one place (tests/wiring.tftest.hcl checks the
  # roles against an allow-list). Everything else is granted on the resource it concerns.
  project_roles = {
    # Firestore has no finer IAM resource than the project.
    "get-counter-reads-firestore" = { role = "roles/datastore.viewer", member = google_service_account.function["get-counter"].member }
    # datastore.user is the narrowest predefined role that can write entities
    # (it also reads them, which the dedup check needs).
    "store-inc-counter-writes-firestore" = { role = "roles/datastore.user", member = google_service_account.function["store-inc-counter"].member }
    # The build account's roles are the three Google lists for a custom build account, each as
    # narrow as it may be granted (README.md, "The build account"):
    # https://cloud.google.com/functions/docs/securing/build-custom-sa and
    # https://cloud.google.com/run/docs/configuring/services/build-service-account ("Logs Writer
    # (roles/logging.logWriter) - for storing build logs in Cloud Logging. Artifact Registry
    # Writer (roles/artifactregistry.writer) - for storing build images in Artifact Registry.
    # Storage Object Admin (roles/storage.objectAdmin) - for retrieving the function source from
    # the Cloud Storage bucket, and to store build images in Artifact Registry.").
    #
    # Logs Writer, for the build's logs (same pages): Cloud Logging has no finer resource than
    # the project to grant it on.
    "build-writes-logs" = { role = "roles/logging.logWriter", member = google_service_account.build.member }
    # Storage Object Admin, for the function source (same pages). Cloud Functions copies the
    # source zip into its own gcf-v2-sources-NUMBER-REGION bucket, created on the first
    # deployment, and the build fetches it from there (a build without a role there failed with
    # "Access to bucket gcf-v2-sources-... denied"): that bucket does not exist before the first
    # function, so the role cannot be granted on the bucket; the condition limits the
    # project-wide grant to it. Our own source bucket is granted on the bucket (below).
    "build-gcf-sources" = {
      role   = "roles/storage.objectAdmin"
      member = google_service_account.build.member
      condition = {
        title      = "gcf-v2-sources bucket only"
        expression = "resource.name.startsWith(\"projects/_/buckets/${local.gcf_sources_bucket}\")"
      }
    }
  }
  # Where Cloud Functions puts each deployment's source (the build reads it there).
  gcf_sources_bucket = "gcf-v2-sources-${data.google_project.this.number}-${var.region}"
}

resource "google_project_service" "this" {
  for_each = local.services

  project = var.project_id
  service = each.value
  # Other things in the project may use these APIs: destroy leaves them on.
  disable_on_destroy = false
}

# Read once the APIs are on (cloudresourcemanager serves it): for the project number in
# service agents' names.
data "google_project" "this" {
  project_id = var.project_id

  depends_on = [google_project_service.this]
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
  collection = local.catalogue.firestore.markers
  field      = local.catalogue.firestore.marker_expiry_field

  ttl_config {}
  # No single-field indexes on a TTL timestamp: they are never queried and
  # would only slow down writes.
  index_config {}
}

# The marker's other fields, none of them indexed either: nothing queries the markers (the function
# creates one by its id, the kit reads them by id), and by default Firestore keeps an ascending and a
# descending single-field index entry of every field of every document, written with the document.
# With every field exempt, a marker writes no index entry but the document's own. "As a best practice,
# you should remove unused indexes to reduce storage costs and improve write performance. By default,
# Cloud Firestore builds a single-field index for each field in a document. You can control single-field
# indexing by defining index exemptions but with a maximum of 200 single-field index exemptions per
# database." (https://firebase.google.com/docs/firestore/solutions/index-map-field)
locals {
  # Every field functions/store_inc_counter.py writes into a marker, but the TTL field above
  # (tests/unit/test_settings.py holds this list to the function's code).
  marker_unindexed_fields = ["visit_type"]
}

resource "google_firestore_field" "marker_unindexed" {
  for_each = toset(local.marker_unindexed_fields)

  project    = var.project_id
  database   = google_firestore_database.default.name
  collection = local.catalogue.firestore.markers
  field      = each.value

  # An empty index_config disables every single-field index of the field (the provider's schema:
  # "Configuring the index configuration with an empty block disables all indexes on the field").
  index_config {}

  # After the TTL field, not beside it: field operations run at once on one database have been refused
  # ("Cannot create more than one Firestore index exemption per collection",
  # https://github.com/hashicorp/terraform-provider-google/issues/14997; a 409 "Please retry, underlying
  # data changed", which the provider now retries: issues/16329).
  depends_on = [google_firestore_field.marker_ttl]
}

# --- Messaging -----------------------------------------------------------------

resource "google_pubsub_topic" "visits" {
  # checkov:skip=CKV_GCP_83: visit events are not sensitive; Google-managed encryption is enough for a load test.
  project = var.project_id
  name    = var.topic_name

  depends_on = [google_project_service.this]
}

# store-inc-counter's own push subscription (no Eventarc): Pub/Sub posts each message, in its
# push envelope, to the function's Cloud Run URL with an OIDC token of the push account;
# functions-framework turns the envelope into the CloudEvent the function takes.
resource "google_pubsub_subscription" "store_inc_counter" {
  project = var.project_id
  name    = "${var.topic_name}-store-inc-counter"
  topic   = google_pubsub_topic.visits.id

  # Also the push request's timeout.
  ack_deadline_seconds       = var.subscription.ack_deadline_seconds
  message_retention_duration = "${var.subscription.message_retention_seconds}s"

  push_config {
    # The run.app URL, not the cloudfunctions.net one: Pub/Sub pushes in the same project
    # count as internal traffic only on the default run.app URL (Cloud Run's ingress
    # documentation), which store-inc-counter's ALLOW_INTERNAL_ONLY ingress needs. Cloud Run
    # accepts its own URL as the token's audience.
    push_endpoint = google_cloudfunctions2_function.this["store-inc-counter"].service_config[0].uri
    oidc_token {
      service_account_email = google_service_account.push.email
      audience              = google_cloudfunctions2_function.this["store-inc-counter"].service_config[0].uri
    }
  }

  # A failed push (any non-2xx answer, including a 429 at max instances, or no answer within
  # the ack deadline) is retried with exponential backoff, then dead-lettered (dead_letter).
  retry_policy {
    minimum_backoff = "${var.subscription.minimum_backoff_seconds}s"
    maximum_backoff = "${var.subscription.maximum_backoff_seconds}s"
  }

  # With dead_letter = false there is no dead-letter policy: a delivery that always fails is
  # retried until the message expires (message_retention_duration), and is counted nowhere.
  dynamic "dead_letter_policy" {
    for_each = var.dead_letter ? [google_pubsub_topic.dead_letter[0].id] : []
    content {
      dead_letter_topic     = dead_letter_policy.value
      max_delivery_attempts = var.subscription.max_delivery_attempts
    }
  }

  expiration_policy {
    ttl = "" # never expires, however long no message comes
  }

  depends_on = [
    google_cloud_run_v2_service_iam_member.push_invokes_store,
    google_pubsub_topic_iam_member.pubsub_agent_dead_letters,
  ]
}

# Visits Pub/Sub gave up on after max_delivery_attempts; the runner counts them. Only with
# dead_letter = true: without a dead-letter policy nothing would ever reach them.
resource "google_pubsub_topic" "dead_letter" {
  # checkov:skip=CKV_GCP_83: visit events are not sensitive; Google-managed encryption is enough for a load test.
  count = var.dead_letter ? 1 : 0

  project = var.project_id
  name    = "${var.topic_name}-dead-letter"

  depends_on = [google_project_service.this]
}

# A pull subscription keeps dead-lettered visits (messages on a topic without a
# subscription are lost) for the runner to count or a person to inspect.
resource "google_pubsub_subscription" "dead_letter" {
  count = var.dead_letter ? 1 : 0

  project = var.project_id
  name    = "${var.topic_name}-dead-letter-pull"
  topic   = google_pubsub_topic.dead_letter[0].id

  ack_deadline_seconds       = 60
  message_retention_duration = "604800s" # 7 days

  expiration_policy {
    ttl = ""
  }
}

# Deployments made before the dead_letter setting keep their dead-letter topic and subscription.
moved {
  from = google_pubsub_topic.dead_letter
  to   = google_pubsub_topic.dead_letter[0]
}

moved {
  from = google_pubsub_subscription.dead_letter
  to   = google_pubsub_subscription.dead_letter[0]
}

# --- Function images -----------------------------------------------------------

# The functions' images, in a repository of our own rather than the gcf-artifacts one Cloud
# Functions would create at the first build: the build account writes to this one alone.
resource "google_artifact_registry_repository" "functions" {
  # checkov:skip=CKV_GCP_84: the images hold only this repository's public code; Google-managed encryption is enough.
  project       = var.project_id
  location      = var.region
  repository_id = "visitkit-functions"
  format        = "DOCKER"
  description   = "Visit counter: the images Cloud Build makes of the functions"

  depends_on = [google_project_service.this]
}

# Artifact Registry Writer, "for storing build images in Artifact Registry"
# (https://cloud.google.com/run/docs/configuring/services/build-service-account), granted on the
# repository the builds use (docker_repository below) rather than the project: the Cloud Functions
# page lets it be set in the repository's IAM policy, on gcf-artifacts by default or on your own
# repository given as dockerRepository (https://cloud.google.com/functions/docs/securing/build-custom-sa).
resource "google_artifact_registry_repository_iam_member" "build_pushes_images" {
  project    = var.project_id
  location   = google_artifact_registry_repository.functions.location
  repository = google_artifact_registry_repository.functions.name
  role       = "roles/artifactregistry.writer"
  member     = google_service_account.build.member
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
  # checkov:skip=CKV_GCP_124: serve-page, get-counter and inc-counter are the public website (ALLOW_ALL, or ALLOW_INTERNAL_AND_GCLB behind edge_protection's load balancer); store-inc-counter is ALLOW_INTERNAL_ONLY.
  for_each = var.functions

  project     = var.project_id
  name        = local.deployed_names[each.key]
  location    = var.region
  description = "Visit counter: ${each.key}"

  build_config {
    runtime     = "python312"
    entry_point = local.entry_points[each.key]
    # Our own build account: new projects' default build account may lack the roles.
    service_account   = google_service_account.build.id
    docker_repository = google_artifact_registry_repository.functions.id
    source {
      storage_source {
        bucket = google_storage_bucket.source.name
        object = google_storage_bucket_object.functions.name
      }
    }
  }

  service_config {
    max_instance_count               = each.value.max_instances
    min_instance_count               = each.value.min_instances
    max_instance_request_concurrency = each.value.concurrency
    available_memory                 = each.value.memory
    available_cpu                    = local.cpu[each.key]
    timeout_seconds                  = each.value.timeout_seconds
    environment_variables            = local.function_environment[each.key]
    service_account_email            = google_service_account.function[each.key].email
    all_traffic_on_latest_revision   = true
    # Pub/Sub's pushes from the same project to the run.app URL count as internal traffic.
    # Behind edge_protection's load balancer the public functions take only its traffic (and
    # internal), so nothing reaches them around its rate limit.
    ingress_settings = !contains(local.public_functions, each.key) ? "ALLOW_INTERNAL_ONLY" : (local.edge ? "ALLOW_INTERNAL_AND_GCLB" : "ALLOW_ALL")
  }

  lifecycle {
    precondition {
      condition     = toset(keys(local.catalogue.functions)) == toset(keys(var.functions))
      error_message = "functions/catalogue.json and the functions variable must name the same functions."
    }
  }

  # The build runs as the build account: its roles first, then the wait for them to propagate
  # (terraform_data.build_grants_wait below; tests/unit/test_infra_graph.py checks this edge).
  depends_on = [
    google_project_service.this,
    google_project_iam_member.this,
    google_storage_bucket_iam_member.build_source_objects,
    google_artifact_registry_repository_iam_member.build_pushes_images,
    terraform_data.build_grants_wait,
  ]
}

# New IAM grants take a while to propagate, and a build started at once may be refused. The google
# provider's own example of a function built by a custom build account
# (google_cloudfunctions2_function) puts a 60 s time_sleep between the grants and the function;
# the time provider is not one this kit uses, so this is Terraform's built-in terraform_data with
# a local sleep (a POSIX shell's). Its triggers are the build account's grants: it is replaced,
# and sleeps again, only when one of them changes (not when only the number of seconds does).
# build_grants_wait_seconds = 0 creates nothing, and runs no command.
resource "terraform_data" "build_grants_wait" {
  count = var.build_grants_wait_seconds > 0 ? 1 : 0

  triggers_replace = merge(
    { for key, grant in google_project_iam_member.this : key => { role = grant.role, member = grant.member, on = "project ${grant.project}", condition = try(one(grant.condition).expression, "") } if startswith(key, "build-") },
    {
      "build-source-objects" = {
        role      = google_storage_bucket_iam_member.build_source_objects.role
        member    = google_storage_bucket_iam_member.build_source_objects.member
        on        = "bucket ${google_storage_bucket_iam_member.build_source_objects.bucket}"
        condition = ""
      }
      "build-pushes-images" = {
        role      = google_artifact_registry_repository_iam_member.build_pushes_images.role
        member    = google_artifact_registry_repository_iam_member.build_pushes_images.member
        on        = "repository ${google_artifact_registry_repository_iam_member.build_pushes_images.repository}"
        condition = ""
      }
    },
  )
  input = var.build_grants_wait_seconds

  provisioner "local-exec" {
    command = "sleep ${self.input}"
  }
}

# --- Identities and access -----------------------------------------------------

resource "google_service_account" "function" {
  for_each = var.functions

  project      = var.project_id
  account_id   = "visitkit-${local.deployed_names[each.key]}"
  display_name = "Visit counter ${each.key} function"

  depends_on = [google_project_service.this]
}

resource "google_service_account" "build" {
  project      = var.project_id
  account_id   = "visitkit-build"
  display_name = "Visit counter Cloud Build of the functions"

  depends_on = [google_project_service.this]
}

# The identity in the push subscription's OIDC tokens: it may only invoke store-inc-counter.
resource "google_service_account" "push" {
  project      = var.project_id
  account_id   = "visitkit-push"
  display_name = "Visit counter Pub/Sub push to store-inc-counter"

  depends_on = [google_project_service.this]
}

# Project-wide roles, all listed in local.project_roles. Like every project-level binding
# they wait for the APIs (cloudresourcemanager serves the project's IAM policy).
resource "google_project_iam_member" "this" {
  for_each = local.project_roles

  project = var.project_id
  role    = each.value.role
  member  = each.value.member

  dynamic "condition" {
    for_each = try([each.value.condition], []) # only the roles in project_roles that name one
    content {
      title      = condition.value.title
      expression = condition.value.expression
    }
  }

  depends_on = [google_project_service.this]
}

moved {
  from = google_project_iam_member.get_counter_reads_firestore
  to   = google_project_iam_member.this["get-counter-reads-firestore"]
}

moved {
  from = google_project_iam_member.store_inc_counter_writes_firestore
  to   = google_project_iam_member.this["store-inc-counter-writes-firestore"]
}

# Deployments made before the dead_letter setting keep the Pub/Sub service agent's grants.
moved {
  from = google_pubsub_topic_iam_member.pubsub_agent_dead_letters
  to   = google_pubsub_topic_iam_member.pubsub_agent_dead_letters[0]
}

moved {
  from = google_pubsub_subscription_iam_member.pubsub_agent_acks_dead_letters
  to   = google_pubsub_subscription_iam_member.pubsub_agent_acks_dead_letters[0]
}

moved {
  from = google_service_account_iam_member.pubsub_agent_signs_push_tokens
  to   = google_service_account_iam_member.pubsub_agent_signs_push_tokens[0]
}

# Storage Object Admin, "for retrieving the function source from the Cloud Storage bucket"
# (https://cloud.google.com/run/docs/configuring/services/build-service-account and
# https://cloud.google.com/functions/docs/securing/build-custom-sa), on our source bucket alone
# (the copy in gcf-v2-sources is covered in project_roles).
resource "google_storage_bucket_iam_member" "build_source_objects" {
  bucket = google_storage_bucket.source.name
  role   = "roles/storage.objectAdmin"
  member = google_service_account.build.member
}

# serve-page gets no role at all.
resource "google_pubsub_topic_iam_member" "inc_counter_publishes" {
  project = var.project_id
  topic   = google_pubsub_topic.visits.name
  role    = "roles/pubsub.publisher"
  member  = google_service_account.function["inc-counter"].member
}

# Dead lettering is done by Pub/Sub's service agent: it publishes to the dead-letter topic
# and acknowledges the message on the subscription it gives up on. Both roles are granted
# on those two resources only, and only with dead_letter = true: with false no grant names the
# agent, for organizations whose iam.allowedPolicyMemberDomains refuses Google's service agents.
#
# The agent is created by Google when the Pub/Sub API is first enabled, sometimes a minute
# or so later. hashicorp/google 6.50.0 has no google_project_service_identity (google-beta
# only) to wait for it, so on a brand-new project these grants may fail once with "Service
# account service-NUMBER@gcp-sa-pubsub.iam.gserviceaccount.com does not exist": applying
# again succeeds (the kit's runner retries apply on that error). See README.md.
resource "google_pubsub_topic_iam_member" "pubsub_agent_dead_letters" {
  count = var.dead_letter ? 1 : 0

  project = var.project_id
  topic   = google_pubsub_topic.dead_letter[0].name
  role    = "roles/pubsub.publisher"
  member  = local.pubsub_service_agent
}

resource "google_pubsub_subscription_iam_member" "pubsub_agent_acks_dead_letters" {
  count = var.dead_letter ? 1 : 0

  project      = var.project_id
  subscription = google_pubsub_subscription.store_inc_counter.name
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_service_agent
}

# Pub/Sub mints the push account's OIDC tokens as its service agent. Google asks for this grant
# only where the agent is old: if the Cloud Pub/Sub service agent was enabled on or before 8 April
# 2021, grant it the Service Account Token Creator role
# (https://cloud.google.com/eventarc/standard/docs/functions/roles-permissions, step 4 of its
# list of grants to Google's service agents); a project whose Pub/Sub API was first enabled later
# needs nothing. Granting it on the push account alone makes
# older projects work too, without a project-wide token creator. Like the two grants above it
# names the agent, so dead_letter = false leaves it out as well (README.md says what an old
# project then needs).
resource "google_service_account_iam_member" "pubsub_agent_signs_push_tokens" {
  count = var.dead_letter ? 1 : 0

  service_account_id = google_service_account.push.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = local.pubsub_service_agent
}

# 2nd gen functions are Cloud Run services: invocation is run.invoker on them. With access =
# "public" allUsers may invoke the three HTTP functions; with "authenticated" only var.invokers
# (an organization's domain restricted sharing refuses allUsers: see README.md).
resource "google_cloud_run_v2_service_iam_member" "invoker" {
  for_each = local.invoker_bindings

  project  = var.project_id
  location = var.region
  name     = google_cloudfunctions2_function.this[each.value.function].service_config[0].service
  role     = "roles/run.invoker"
  member   = each.value.member

  # The load generator's member is spelt out above (for_each keys must be known when planning).
  depends_on = [google_service_account.load_generator]
}

# access = "authenticated" with a user login: an account the user may act as, whose ID tokens the
# kit and Locust send (a user's own ID tokens cannot name a function as their audience).
resource "google_service_account" "load_generator" {
  count = local.load_generator ? 1 : 0

  project      = var.project_id
  account_id   = "visitkit-loadgen"
  display_name = "Visit counter load generator (ID tokens for the authenticated functions)"

  depends_on = [google_project_service.this]
}

resource "google_service_account_iam_member" "load_generator_users" {
  for_each = local.load_generator ? toset(var.load_generator_users) : toset([])

  service_account_id = google_service_account.load_generator[0].name
  role               = "roles/iam.serviceAccountOpenIdTokenCreator"
  member             = each.value
}

# Deployments made before the access setting keep their allUsers bindings.
moved {
  from = google_cloud_run_v2_service_iam_member.public["serve-page"]
  to   = google_cloud_run_v2_service_iam_member.invoker["serve-page allUsers"]
}

moved {
  from = google_cloud_run_v2_service_iam_member.public["get-counter"]
  to   = google_cloud_run_v2_service_iam_member.invoker["get-counter allUsers"]
}

moved {
  from = google_cloud_run_v2_service_iam_member.public["inc-counter"]
  to   = google_cloud_run_v2_service_iam_member.invoker["inc-counter allUsers"]
}

# The push account is the only principal that may invoke store-inc-counter.
resource "google_cloud_run_v2_service_iam_member" "push_invokes_store" {
  project  = var.project_id
  location = var.region
  name     = google_cloudfunctions2_function.this["store-inc-counter"].service_config[0].service
  role     = "roles/run.invoker"
  member   = google_service_account.push.member
}

# --- Log-based metrics (read by the runner) ---------------------------------------

locals {
  # The Cloud Run request log of the four functions' services, and store-inc-counter's own lines.
  request_log_terms = [
    "resource.type=\"cloud_run_revision\"",
    "logName=\"projects/${var.project_id}/logs/run.googleapis.com%2Frequests\"",
  ]
  services_term   = "resource.labels.service_name=(${join(" OR ", [for name in values(local.deployed_names) : "\"${name}\""])})"
  store_log_terms = ["resource.type=\"cloud_run_revision\"", "resource.labels.service_name=\"${local.deployed_names["store-inc-counter"]}\""]

  # Each log-based metric's filter, here so that tests/unit/test_log_exclusions.py can read them
  # (terraform console) beside the exclusion filters below, and check the two on sample entries.
  log_metric_filters = {
    requests_429     = join(" AND ", concat(local.request_log_terms, ["httpRequest.status=429", local.services_term]))
    store_deliveries = join(" AND ", concat(local.store_log_terms, ["jsonPayload.message=\"visit message\""]))
  }
}

# Requests Cloud Run refused with 429 (no instance free at max instances), per function.
# Cloud Run's request_count leaves most of these out; its request logs have them all.
resource "google_logging_metric" "requests_429" {
  project     = var.project_id
  name        = "visitkit_requests_429"
  description = "Requests to the visit counter's functions refused with 429 Too Many Requests, by Cloud Run service."
  filter      = local.log_metric_filters.requests_429
  # No bucket_name: a project-scoped metric, which counts the entries that log_exclusions drops too
  # (below, "Log exclusions").

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
    labels {
      key         = "service_name"
      value_type  = "STRING"
      description = "Cloud Run service (deployed function name)."
    }
  }
  label_extractors = {
    service_name = "EXTRACT(resource.labels.service_name)"
  }

  depends_on = [google_project_service.this]
}

# store-inc-counter logs one JSON line per delivery: {"message": "visit message",
# "outcome": "counted" | "already_counted" | "malformed" | "failed", ...}. "failed" is logged at
# ERROR when Firestore fails and the delivery is not acknowledged (no 2xx), so Pub/Sub redelivers
# it, and dead-letters it after max_delivery_attempts. The filter has no severity term: lines of
# every severity count, each under its own outcome.
resource "google_logging_metric" "store_deliveries" {
  project     = var.project_id
  name        = "visitkit_store_deliveries"
  description = "Pub/Sub deliveries store-inc-counter handled, by outcome: counted, already_counted, malformed or failed (Firestore failed; Pub/Sub redelivers)."
  filter      = local.log_metric_filters.store_deliveries
  # No bucket_name: project-scoped, so it counts the counted lines log_exclusions drops (below).

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
    labels {
      key         = "outcome"
      value_type  = "STRING"
      description = "counted, already_counted, malformed or failed."
    }
  }
  label_extractors = {
    outcome = "EXTRACT(jsonPayload.outcome)"
  }

  depends_on = [google_project_service.this]
}

# --- Log exclusions (log_exclusions) ---------------------------------------------------
#
# At 10,000 visits/s the request log entries (one per request, ~1,350 bytes) and store-inc-counter's
# line per delivery (~1,155 bytes) are the largest line of the bill (scripts/predict prices them):
# log_exclusions drops a share of the two kinds that say nothing but "it worked", with the sample
# function ("By using the sample function, you can exclude less than 100% of the matching log
# entries. For example, the following query matches 99% of low-severity log entries from Google
# Cloud Storage buckets: resource.type=gcs_bucket severity<ERROR sample(insertId, 0.99)",
# https://cloud.google.com/logging/docs/reference/v2/rest/v2/exclusions). A project exclusion is one
# "in the _Default sink" (projects.exclusions.create), so the entries are not stored in the _Default
# bucket, which is what Cloud Logging bills; the _Default sink's own filter and anyone else's
# exclusions stay as they are.
#
# The rule: a metric never loses an entry it counts.
# - "By default, user-defined log-based metrics are calculated from all logs received by the Logging
#   API for the Google Cloud project, regardless of any inclusion filters or exclusion filters that
#   might apply to the Google Cloud project." Bucket-scoped ones "evaluate log entries routed to a
#   specific log bucket", so they would not see what an exclusion drops
#   (https://cloud.google.com/logging/docs/logs-based-metrics,
#   https://cloud.google.com/logging/docs/logs-based-metrics/bucket-lbm). Both metrics above are
#   project-scoped (no bucket_name; the precondition below fails the plan otherwise), so
#   visitkit_store_deliveries still counts every counted line the second exclusion drops: that is the
#   one entry kind a metric counts that an exclusion may match, and only because of this.
# - Beyond that, by construction: the request exclusion matches only statuses 200 to 399, never the
#   429s visitkit_requests_429 counts, nor any 4xx or 5xx (the runner reads store-inc-counter's 403s from
#   the stored request log, gcp.py's push_refusals); the line exclusion matches only outcome "counted",
#   never the already_counted, malformed and failed lines (failed is what the alert fires on and what
#   someone reads after it). An entry without a status, or of another log, matches neither.
# tests/unit/test_log_exclusions.py evaluates these filters and the metrics' on sample entries and
# holds the rule; tests/logging.tftest.hcl plans the resources.
locals {
  log_exclusion_specs = {
    "visitkit-successful-requests" = {
      percent     = var.log_exclusions.successful_requests_percent
      description = "Visit counter: ${var.log_exclusions.successful_requests_percent}% of the 2xx and 3xx request log entries of its Cloud Run services (log_exclusions.successful_requests_percent); every 4xx and 5xx is kept."
      terms       = concat(local.request_log_terms, [local.services_term, "httpRequest.status>=200", "httpRequest.status<400"])
    }
    "visitkit-counted-deliveries" = {
      percent     = var.log_exclusions.counted_deliveries_percent
      description = "Visit counter: ${var.log_exclusions.counted_deliveries_percent}% of store-inc-counter's \"visit message\" lines with outcome counted (log_exclusions.counted_deliveries_percent); every other outcome is kept, and visitkit_store_deliveries counts them all."
      terms       = concat(local.store_log_terms, ["jsonPayload.message=\"visit message\"", "jsonPayload.outcome=\"counted\""])
    }
  }
  # Only a share above 0 makes an exclusion; 100 drops every matching entry (no sample term).
  log_exclusion_filters = { for name, spec in local.log_exclusion_specs : name => join(" AND ", concat(
    spec.terms, spec.percent < 100 ? ["sample(insertId, ${spec.percent / 100})"] : [],
  )) if spec.percent > 0 }
}

resource "google_logging_project_exclusion" "this" {
  for_each = local.log_exclusion_filters

  project     = var.project_id
  name        = each.key
  description = local.log_exclusion_specs[each.key].description
  filter      = each.value

  lifecycle {
    precondition {
      condition     = google_logging_metric.requests_429.bucket_name == null && google_logging_metric.store_deliveries.bucket_name == null
      error_message = "log_exclusions needs project-scoped log-based metrics: a bucket-scoped metric counts only the entries routed to its bucket, and would lose what an exclusion drops."
    }
  }

  depends_on = [google_project_service.this]
}

# --- Alerts ------------------------------------------------------------------------

locals {
  # Channel ids become the full names the API takes: projects/PROJECT/notificationChannels/ID.
  alert_channels = [for c in var.alert_notification_channels : startswith(c, "projects/") ? c : "projects/${var.project_id}/notificationChannels/${c}"]
}

# Visits Pub/Sub gave up on stay in the dead-letter pull subscription (7 days) until someone
# pulls them, so its backlog stays above 0 from the first dead-lettered visit on.
# subscription/num_undelivered_messages is a GAUGE on the pubsub_subscription resource, sampled
# every 60 s and visible up to 120 s later (Cloud Monitoring's Pub/Sub metric list,
# https://cloud.google.com/monitoring/api/metrics_gcp_p_z): the max of each minute is compared.
# Without data (no sample yet) the condition counts as not met (EVALUATION_MISSING_DATA_INACTIVE:
# "If there is no data to evaluate the condition, then evaluate the condition as false").
# Without dead_letter there is no such subscription, and no policy.
resource "google_monitoring_alert_policy" "dead_letter_backlog" {
  count = var.alerts.enabled && var.dead_letter ? 1 : 0

  project               = var.project_id
  display_name          = "Visit counter: visits dead-lettered"
  combiner              = "OR"
  severity              = "ERROR"
  notification_channels = local.alert_channels

  conditions {
    display_name = "${google_pubsub_subscription.dead_letter[0].name} holds more than ${var.alerts.dead_letter_backlog_above} visits for ${var.alerts.dead_letter_minutes} min"
    condition_threshold {
      filter = join(" AND ", [
        "resource.type = \"pubsub_subscription\"",
        "resource.labels.subscription_id = \"${google_pubsub_subscription.dead_letter[0].name}\"",
        "metric.type = \"pubsub.googleapis.com/subscription/num_undelivered_messages\"",
      ])
      comparison      = "COMPARISON_GT"
      threshold_value = var.alerts.dead_letter_backlog_above
      # "Only values that are a multiple of a minute ... are supported" (the API's duration).
      duration                = "${var.alerts.dead_letter_minutes * 60}s"
      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"
      aggregations {
        alignment_period   = "60s"
        per_series_aligner = "ALIGN_MAX"
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    subject   = "Visit counter: visits were dead-lettered"
    content   = <<-EOT
      Pub/Sub gave up on some visits after ${var.subscription.max_delivery_attempts} failed pushes to
      store-inc-counter and moved them to `${google_pubsub_topic.dead_letter[0].name}`; they are kept in
      the pull subscription `${google_pubsub_subscription.dead_letter[0].name}` for 7 days, and are not
      counted.

      1. Why the pushes failed: store-inc-counter's logs (`"visit message"` lines with outcome
         `failed`, and its request log's non-2xx answers; 429s mean it was at its max instances).
      2. Look at the visits: `gcloud pubsub subscriptions pull ${google_pubsub_subscription.dead_letter[0].name} --project ${var.project_id} --limit 10`
         (without `--auto-ack` they stay).
      3. Once the cause is fixed, publish each again to `${google_pubsub_topic.visits.name}` with its
         data and attributes (its `visit_id` attribute names the dedup marker, so a visit counted
         meanwhile is not counted twice), then acknowledge them; the incident closes when the
         backlog is back at or below the threshold.
    EOT
  }

  depends_on = [google_project_service.this]
}

# store-inc-counter's "failed" deliveries (Firestore failed; Pub/Sub redelivers them), from the
# log-based metric above. A log-based metric's points carry the log entry's monitored resource
# (cloud_run_revision here) and its labels as metric labels. Counter log metrics are DELTA:
# ALIGN_SUM adds each series' counts over the window, REDUCE_SUM adds the revisions together.
# No matching line, no point: missing data counts as not met, so the incident closes by itself.
#
# An alert policy on a user-defined metric is refused while the metric is unknown to Cloud
# Monitoring: "Error creating AlertPolicy: googleapi: Error 404: Cannot find metric(s) that match
# type = "logging.googleapis.com/user/NAME". If a metric was created recently, it could take up to
# 10 minutes to become available. Please try again soon." (recorded in
# https://github.com/GoogleCloudPlatform/cloud-foundation-fabric/pull/3739; older wording "The
# metric referenced by the provided filter is unknown",
# https://github.com/hashicorp/terraform-provider-google/issues/10325 and /issues/11102). The
# reference to the metric's name and depends_on make Terraform create the metric first; the
# provider does not retry that 404, so on a first apply the policy may still fail once while the
# new metric propagates, and applying again succeeds (README.md).
resource "google_monitoring_alert_policy" "failed_deliveries" {
  count = var.alerts.enabled ? 1 : 0

  project               = var.project_id
  display_name          = "Visit counter: store-inc-counter failed deliveries"
  combiner              = "OR"
  severity              = "WARNING"
  notification_channels = local.alert_channels

  conditions {
    display_name = "More than ${var.alerts.failed_deliveries_above} failed deliveries in ${var.alerts.failed_deliveries_window_minutes} min"
    condition_threshold {
      filter = join(" AND ", [
        "resource.type = \"cloud_run_revision\"",
        "metric.type = \"logging.googleapis.com/user/${google_logging_metric.store_deliveries.name}\"",
        "metric.labels.outcome = \"failed\"",
      ])
      comparison              = "COMPARISON_GT"
      threshold_value         = var.alerts.failed_deliveries_above
      duration                = "0s"
      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"
      aggregations {
        alignment_period     = "${var.alerts.failed_deliveries_window_minutes * 60}s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    subject   = "Visit counter: store-inc-counter could not write to Firestore"
    content   = <<-EOT
      store-inc-counter logged `"visit message"` lines with outcome `failed` at ERROR: Firestore
      refused or timed out a write. The visit was not acknowledged, so Pub/Sub pushes it again with
      backoff (${var.subscription.minimum_backoff_seconds} s to ${var.subscription.maximum_backoff_seconds} s);
      ${var.dead_letter ? "after ${var.subscription.max_delivery_attempts} attempts it is dead-lettered (the other alert)." : "with dead_letter = false it is retried until it expires, ${var.subscription.message_retention_seconds} s after it was published, and is then lost."}

      1. The error: Logs Explorer, `resource.type="cloud_run_revision"
         resource.labels.service_name="${local.deployed_names["store-inc-counter"]}" jsonPayload.outcome="failed"`,
         or Error Reporting, which groups the stack traces.
      2. Firestore's side: the Google Cloud status page, the database's quotas and its
         `firestore.googleapis.com/document/write_count`; `roles/datastore.user` of the
         function's service account.
      3. Nothing to replay while the failures are transient: redeliveries count each visit once.
    EOT
  }

  depends_on = [google_project_service.this, google_logging_metric.store_deliveries]
}

# --- Edge protection (edge_protection.enabled) ---------------------------------------
#
# A sketch of what caps abuse beyond max_instances: a global external Application Load Balancer
# (load_balancing_scheme EXTERNAL_MANAGED) whose backends are serverless NEGs, one per public
# function, each backend service carrying a Cloud Armor security policy that rate-limits per client
# IP. Google's documentation this relies on:
# - A serverless NEG of type Cloud Run "supports Cloud Run and Cloud Run functions (2nd gen)" (the
#   cloud_function type is for 1st gen), behind the global external Application Load Balancer:
#   https://cloud.google.com/load-balancing/docs/negs/serverless-neg-concepts
# - "Cloud Armor also protects serverless NEGs when traffic is routed through a load balancer";
#   traffic that bypasses it is kept out by the ingress setting:
#   https://cloud.google.com/armor/docs/security-policy-overview. A 2nd gen function's
#   ingress_settings takes ALLOW_INTERNAL_AND_GCLB ("Allow HTTP traffic from private VPC sources
#   and through GCLB"), and "all network ingress paths are subject to the service's ingress
#   setting" (https://cloud.google.com/run/docs/securing/ingress).
# - "Cloud Armor applies the rate limiting threshold to each associated backend": the limit holds
#   per client IP and per function, not across the three
#   (https://cloud.google.com/armor/docs/rate-limiting-overview). "When you configure a rule with a
#   rate-based ban action, you can't change it to a throttle action later" (same page): throttle
#   is the default for that reason.
# - A backend service with serverless NEG backends takes no health check ("A backend service
#   cannot have a healthcheck with Serverless network endpoint group backends.") and no timeout
#   ("Timeout sec is not supported for a backend service with Serverless network endpoint
#   groups."), the API's errors recorded in
#   https://github.com/hashicorp/terraform-provider-google/issues/7311 and
#   https://github.com/terraform-google-modules/terraform-google-lb-http/pull/358: the function's
#   own timeout_seconds bounds a request.
# Not applied against Google Cloud from here (README.md says what a live run has to settle).

resource "google_compute_region_network_endpoint_group" "edge" {
  for_each = local.edge ? local.public_functions : toset([])

  project               = var.project_id
  name                  = "visitkit-${local.deployed_names[each.key]}"
  region                = var.region
  network_endpoint_type = "SERVERLESS"
  cloud_run {
    # The function's Cloud Run service, which has the function's name (the log-based metrics
    # above filter on it too). Not service_config.service: that is the full
    # projects/P/locations/R/services/NAME (the Cloud Functions API's format, passed through by
    # the provider), and the NEG takes a bare name, "1-63 characters ... RFC1035" (its schema).
    service = local.deployed_names[each.key]
  }

  depends_on = [google_project_service.this, google_cloudfunctions2_function.this]
}

resource "google_compute_security_policy" "edge" {
  # checkov:skip=CKV_GCP_73: the Log4j (CVE-2021-44228) WAF rule protects Java backends; these are Python functions, and each preconfigured rule is billed.
  count = local.edge ? 1 : 0

  project     = var.project_id
  name        = "visitkit-rate-limit"
  description = "Visit counter: ${var.edge_protection.requests_per_minute} requests per minute per client IP and function"
  type        = "CLOUD_ARMOR"

  rule {
    action      = var.edge_protection.action
    priority    = 1000
    description = "per client IP rate limit"
    match {
      versioned_expr = "SRC_IPS_V1"
      config {
        src_ip_ranges = ["*"]
      }
    }
    rate_limit_options {
      conform_action = "allow"
      # 429 is one of the documented deny statuses (403, 404, 429, 502), the one a client reads
      # as "slow down", as Cloud Run's own refusal at max instances.
      exceed_action  = "deny(429)"
      enforce_on_key = "IP"
      rate_limit_threshold {
        count        = var.edge_protection.requests_per_minute
        interval_sec = 60
      }
      # "Can only be specified if the action for the rule is rate_based_ban."
      ban_duration_sec = var.edge_protection.action == "rate_based_ban" ? var.edge_protection.ban_duration_seconds : null
    }
  }

  # Every security policy ends with a default rule (priority 2147483647, match "*").
  rule {
    action      = "allow"
    priority    = 2147483647
    description = "default rule"
    match {
      versioned_expr = "SRC_IPS_V1"
      config {
        src_ip_ranges = ["*"]
      }
    }
  }

  depends_on = [google_project_service.this]
}

resource "google_compute_backend_service" "edge" {
  for_each = google_compute_region_network_endpoint_group.edge

  project               = var.project_id
  name                  = "visitkit-${local.deployed_names[each.key]}"
  load_balancing_scheme = "EXTERNAL_MANAGED"
  security_policy       = google_compute_security_policy.edge[0].id

  backend {
    group = each.value.id
  }

  # Cloud Armor's per-request decisions are part of the load balancer's request logs, and
  # "Logging for new backend services is disabled by default"
  # (https://cloud.google.com/armor/docs/request-logging): on, for every request, so that
  # jsonPayload.enforcedSecurityPolicy.outcome="DENY" shows the rate limit at work.
  log_config {
    enable      = true
    sample_rate = 1
  }
}

# Routes as the functions' own URLs do: /app (and below) to serve-page, /get-counter,
# /inc-counter. Any other path is redirected to the page, without reaching a function.
resource "google_compute_url_map" "edge" {
  count = local.edge ? 1 : 0

  project = var.project_id
  name    = "visitkit"

  default_url_redirect {
    path_redirect          = "/${local.deployed_names["serve-page"]}"
    redirect_response_code = "FOUND"
    strip_query            = false
  }

  host_rule {
    hosts        = ["*"]
    path_matcher = "functions"
  }

  path_matcher {
    name = "functions"
    default_url_redirect {
      path_redirect          = "/${local.deployed_names["serve-page"]}"
      redirect_response_code = "FOUND"
      strip_query            = false
    }
    dynamic "path_rule" {
      for_each = google_compute_backend_service.edge
      content {
        paths   = ["/${local.deployed_names[path_rule.key]}", "/${local.deployed_names[path_rule.key]}/*"]
        service = path_rule.value.id
      }
    }
  }
}

resource "google_compute_global_address" "edge" {
  count = local.edge ? 1 : 0

  project    = var.project_id
  name       = "visitkit-edge"
  ip_version = "IPV4"

  depends_on = [google_project_service.this]
}

# With a domain: HTTPS with a Google-managed certificate, which Google provisions once the domain's
# DNS A record points at the address.
resource "google_compute_managed_ssl_certificate" "edge" {
  count = local.edge_https ? 1 : 0

  project = var.project_id
  name    = "visitkit"
  managed {
    domains = [var.edge_protection.domain]
  }

  depends_on = [google_project_service.this]
}

resource "google_compute_ssl_policy" "edge" {
  count = local.edge_https ? 1 : 0

  project         = var.project_id
  name            = "visitkit"
  profile         = "MODERN"
  min_tls_version = "TLS_1_2"

  depends_on = [google_project_service.this]
}

resource "google_compute_target_https_proxy" "edge" {
  count = local.edge_https ? 1 : 0

  project          = var.project_id
  name             = "visitkit"
  url_map          = google_compute_url_map.edge[0].id
  ssl_certificates = [google_compute_managed_ssl_certificate.edge[0].id]
  ssl_policy       = google_compute_ssl_policy.edge[0].id
}

# Without a domain: plain HTTP on the address (a managed certificate needs a domain).
resource "google_compute_target_http_proxy" "edge" {
  count = local.edge && !local.edge_https ? 1 : 0

  project = var.project_id
  name    = "visitkit"
  url_map = google_compute_url_map.edge[0].id
}

resource "google_compute_global_forwarding_rule" "edge" {
  count = local.edge ? 1 : 0

  project               = var.project_id
  name                  = "visitkit"
  load_balancing_scheme = "EXTERNAL_MANAGED"
  ip_protocol           = "TCP"
  # The IP number: the API always returns the number when it reads the rule back.
  ip_address = google_compute_global_address.edge[0].address
  port_range = local.edge_https ? "443" : "80"
  target     = one(concat(google_compute_target_https_proxy.edge[*].id, google_compute_target_http_proxy.edge[*].id))
}
