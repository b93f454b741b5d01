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

  # Also the push request's timeout; in pull mode, how long the puller has to commit a batch before
  # Pub/Sub redelivers it.
  ack_deadline_seconds       = var.subscription.ack_deadline_seconds
  message_retention_duration = "${var.subscription.message_retention_seconds}s"

  # Push mode only: in pull mode (store_mode = "pull") this is a pull subscription, with the same name
  # and settings, that store-inc-counter's puller (pull.tf) pulls from.
  dynamic "push_config" {
    for_each = local.pull ? [] : [google_cloudfunctions2_function.this["store-inc-counter"].service_config[0].uri]
    content {
      # The run.app URL, not the cloudfunctions.net one: Pub/Sub pushes in the same project
      # count as internal traffic only on the default run.app URL (Cloud Run's ingress
      # documentation), which store-inc-counter's ALLOW_INTERNAL_ONLY ingress needs. Cloud Run
      # accepts its own URL as the token's audience.
      push_endpoint = push_config.value
      oidc_token {
        service_account_email = google_service_account.push.email
        audience              = push_config.value
      }
    }
  }

  # A failed push (any non-2xx answer, including a 429 at max instances, or no answer within
  # the ack deadline) is retried with exponential backoff, then dead-lettered (dead_letter). In pull
  # mode the same holds for a message the puller nacks or does not acknowledge in time.
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
