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
      3. Once the cause is fixed, replay them with the kit, from the checkout and iteration folder this
         deployment was applied with: `scripts/kit replay-dead-letters ITERATION --project ${var.project_id} --dry-run`,
         then the same without `--dry-run`. Do not publish them again by hand: ${local.pull ? "in pull mode the store refuses a repeat only when it was published within pull.dedup_window_minutes (${var.pull.dedup_window_minutes}) of the counted copy, and dead-lettering takes hours, so a visit whose other copy was counted meanwhile would be counted twice" : "a visit is refused as a repeat only while its dedup marker lives (marker_ttl_days), so an older one would be counted twice"}.
         The command checks each visit against what the store wrote (${local.pull ? "the visit_batches documents" : "its marker"},
         kept ${var.marker_ttl_days} days): already stored, it acknowledges it; not stored, it publishes it again to
         `${google_pubsub_topic.visits.name}` (same data and attributes), then acknowledges it; first published more
         than ${var.marker_ttl_days} days less an hour ago, or without a `visit_id`, no check can tell, so it refuses
         it, leaves it in the subscription and exits 1.
      4. The incident closes when the backlog is back at or below the threshold: refused visits keep it
         open until someone has judged them and acknowledged them (`gcloud pubsub subscriptions pull
         ${google_pubsub_subscription.dead_letter[0].name} --project ${var.project_id} --auto-ack`).
    EOT
  }

  depends_on = [google_project_service.this]
}

# store-inc-counter's "failed" deliveries (Firestore failed; Pub/Sub redelivers them), from the
# log-based metric in logging.tf. A log-based metric's points carry the log entry's monitored
# resource (cloud_run_revision here) and its labels as metric labels. Counter log metrics are DELTA:
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
