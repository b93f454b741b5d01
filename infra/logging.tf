# --- Log-based metrics (read by the runner) ---------------------------------------

locals {
  # The Cloud Run request log of the four functions' services, and store-inc-counter's own lines.
  request_log_terms = [
    "resource.type=\"cloud_run_revision\"",
    "logName=\"projects/${var.project_id}/logs/run.googleapis.com%2Frequests\"",
  ]
  services_term = "resource.labels.service_name=(${join(" OR ", [for name in values(local.deployed_names) : "\"${name}\""])})"
  # store-inc-counter's line: one per delivery in push mode, one per batch in pull mode (its counted,
  # duplicates and malformed fields say how many visits: a log-based counter counts the lines, the
  # store_batch_visits distributions below sum those fields).
  store_log_message = local.pull ? "visit batch" : "visit message"
  store_log_terms   = ["resource.type=\"cloud_run_revision\"", "resource.labels.service_name=\"${local.deployed_names["store-inc-counter"]}\""]
  # Pull mode: each count of the puller's "visit batch" line (functions/store_batch.py) that says how many
  # visits, and the outcomes whose lines carry it: counted, duplicates and malformed in a committed or
  # nothing_to_count batch, nacked (the whole batch, back to Pub/Sub) in a failed or lease_lost one.
  store_batch_counts = local.pull ? {
    counted    = ["committed", "nothing_to_count"]
    duplicates = ["committed", "nothing_to_count"]
    malformed  = ["committed", "nothing_to_count"]
    nacked     = ["failed", "lease_lost"]
  } : {}
  store_batch_filters = { for count, outcomes in local.store_batch_counts : "store_batch_${count}" => join(" AND ", concat(
    local.store_log_terms, ["jsonPayload.message=\"visit batch\"", "jsonPayload.outcome=(${join(" OR ", [for o in outcomes : "\"${o}\""])})"],
  )) }

  # Each log-based metric's filter, here so that tests/unit/test_log_exclusions.py can read them
  # (terraform console) beside the exclusion filters below, and check the two on sample entries.
  log_metric_filters = merge({
    requests_429     = join(" AND ", concat(local.request_log_terms, ["httpRequest.status=429", local.services_term]))
    store_deliveries = join(" AND ", concat(local.store_log_terms, ["jsonPayload.message=\"${local.store_log_message}\""]))
  }, local.store_batch_filters)
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

# In pull mode the line is the puller's "visit batch", one per batch, with the batch's outcome
# ("failed" when its commit failed and the batch goes back to Pub/Sub): the metric then counts batches
# by outcome, not visits (the visits are the store_batch_visits metrics' below, which the runner reads),
# and the failed-deliveries alert fires on failed batches.
# Push mode: store-inc-counter logs one JSON line per delivery: {"message": "visit message",
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

# Pull mode only: the visits of the puller's batch lines, one DISTRIBUTION metric per count
# (local.store_batch_counts), whose value is the line's count (value_extractor): per minute Cloud
# Monitoring answers the distribution of the batches' counts, and its mean x count is the minute's visits
# (scripts/visitkit/cloud/monitoring.py, distribution_sum). A log-based counter counts lines, so it cannot
# say how many visits a batch of up to pull.batch_size held. Named after visitkit_store_deliveries
# (visitkit_store_deliveries_counted, ...), so the runner finds them by that metric's output.
resource "google_logging_metric" "store_batch_visits" {
  for_each = local.store_batch_counts

  project     = var.project_id
  name        = "${google_logging_metric.store_deliveries.name}_${each.key}"
  description = "Visits the pull store's batches ${each.key == "nacked" ? "sent back to Pub/Sub (a failed or lease_lost batch's)" : "held as ${each.key} (a committed or nothing_to_count batch's)"}: the distribution of its \"visit batch\" lines' ${each.key} field."
  filter      = local.log_metric_filters["store_batch_${each.key}"]
  # No bucket_name: project-scoped, as the two above.

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = "1"
  }
  value_extractor = "EXTRACT(jsonPayload.${each.key})"
  # 0 in the underflow bucket, then [1, 2), [2, 4), ... [1024, 2048): a batch holds at most 1,000 messages
  # (pull.batch_size). The sum is exact whatever the buckets; they show the batches' sizes.
  bucket_options {
    exponential_buckets {
      num_finite_buckets = 11
      growth_factor      = 2
      scale              = 1
    }
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
      condition     = google_logging_metric.requests_429.bucket_name == null && google_logging_metric.store_deliveries.bucket_name == null && alltrue([for metric in google_logging_metric.store_batch_visits : metric.bucket_name == null])
      error_message = "log_exclusions needs project-scoped log-based metrics: a bucket-scoped metric counts only the entries routed to its bucket, and would lose what an exclusion drops."
    }
  }

  depends_on = [google_project_service.this]
}
