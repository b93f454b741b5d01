# --- Identities and access -----------------------------------------------------

locals {
  # Pub/Sub's service agent: it pushes to store-inc-counter (with the push account's OIDC
  # token) and moves failed messages to the dead-letter topic. Named in grants only with
  # dead_letter = true (below).
  pubsub_service_agent = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"

  # Every project-wide role the kit grants, in one place (tests/wiring.tftest.hcl checks the
  # roles against an allow-list). Everything else is granted on the resource it concerns.
  project_roles = merge(local.base_project_roles, local.page_reads_firestore)
  # With page_embeds_count, serve-page reads the page's total itself (functions/totals.py), as get-counter does.
  page_reads_firestore = { for name, grant in {
    "serve-page-reads-firestore" = { role = "roles/datastore.viewer", member = google_service_account.function["serve-page"].member }
  } : name => grant if var.page_embeds_count }
  base_project_roles = {
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
# (the copy in gcf-v2-sources is covered in project_roles). In pull mode gcloud also stages the
# puller's source under staging/ in this bucket, and the puller's build reads it there (pull.tf).
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
  # Pull mode sends no push, hence no token to sign.
  count = var.dead_letter && !local.pull ? 1 : 0

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

  # The load generator's member is spelt out in local.public_invokers (main.tf; for_each keys must be
  # known when planning).
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

# The push account is the only principal that may invoke store-inc-counter. In pull mode nobody
# may: nothing pushes to the puller (pull.tf).
resource "google_cloud_run_v2_service_iam_member" "push_invokes_store" {
  count = local.pull ? 0 : 1

  project  = var.project_id
  location = var.region
  name     = google_cloudfunctions2_function.this["store-inc-counter"].service_config[0].service
  role     = "roles/run.invoker"
  member   = google_service_account.push.member
}

# Deployments made before store_mode keep the push account's invoker grant.
moved {
  from = google_cloud_run_v2_service_iam_member.push_invokes_store
  to   = google_cloud_run_v2_service_iam_member.push_invokes_store[0]
}
