# The alert policies: on the dead-letter backlog and on store-inc-counter's failed deliveries,
# their filters, thresholds and notification channels. `command = apply` against the mocks, so
# that the names they are built from (subscription, metric) are the resources' own.
mock_provider "google" {
  mock_data "google_project" {
    defaults = {
      number = "123456789012"
    }
  }
}
mock_provider "archive" {}

variables {
  project_id        = "visitkit-test"
  shards_per_page   = 2
  cache_ttl_seconds = 10
  functions = {
    "serve-page"        = { max_instances = 2, concurrency = 1 }
    "get-counter"       = { max_instances = 2, concurrency = 1 }
    "inc-counter"       = { max_instances = 2, concurrency = 1 }
    "store-inc-counter" = { max_instances = 2, concurrency = 1 }
  }
  # The apply runs would otherwise really sleep (build.tftest.hcl tests the wait).
  build_grants_wait_seconds = 0
}

run "dead_letter_backlog_alert" {
  command = apply

  assert {
    condition     = length(google_monitoring_alert_policy.dead_letter_backlog) == 1
    error_message = "By default there is an alert policy on the dead-letter backlog."
  }
  assert {
    condition = alltrue([for term in [
      "resource.type = \"pubsub_subscription\"",
      "resource.labels.subscription_id = \"${google_pubsub_subscription.dead_letter[0].name}\"",
      "metric.type = \"pubsub.googleapis.com/subscription/num_undelivered_messages\"",
    ] : strcontains(google_monitoring_alert_policy.dead_letter_backlog[0].conditions[0].condition_threshold[0].filter, term)])
    error_message = "The backlog alert watches num_undelivered_messages of the dead-letter pull subscription."
  }
  assert {
    condition     = !strcontains(google_monitoring_alert_policy.dead_letter_backlog[0].conditions[0].condition_threshold[0].filter, "\"${google_pubsub_subscription.store_inc_counter.name}\"")
    error_message = "The backlog alert is not on the push subscription (its backlog is the normal lag)."
  }
  assert {
    condition     = google_monitoring_alert_policy.dead_letter_backlog[0].conditions[0].condition_threshold[0].comparison == "COMPARISON_GT" && google_monitoring_alert_policy.dead_letter_backlog[0].conditions[0].condition_threshold[0].threshold_value == 0 && google_monitoring_alert_policy.dead_letter_backlog[0].conditions[0].condition_threshold[0].duration == "300s"
    error_message = "Default: any dead-lettered visit (above 0) for 5 minutes."
  }
  assert {
    condition     = google_monitoring_alert_policy.dead_letter_backlog[0].conditions[0].condition_threshold[0].aggregations[0].per_series_aligner == "ALIGN_MAX" && google_monitoring_alert_policy.dead_letter_backlog[0].conditions[0].condition_threshold[0].aggregations[0].alignment_period == "60s"
    error_message = "The backlog, a gauge sampled every minute, is compared by its maximum per minute."
  }
  assert {
    condition     = strcontains(google_monitoring_alert_policy.dead_letter_backlog[0].documentation[0].content, "gcloud pubsub subscriptions pull ${google_pubsub_subscription.dead_letter[0].name} --project visitkit-test")
    error_message = "The backlog alert's documentation says how to look at the dead-lettered visits."
  }
  assert {
    condition     = strcontains(google_monitoring_alert_policy.dead_letter_backlog[0].documentation[0].content, "scripts/kit replay-dead-letters ITERATION --project visitkit-test") && !strcontains(google_monitoring_alert_policy.dead_letter_backlog[0].documentation[0].content, "publish each again")
    error_message = "The backlog alert's documentation replays the visits with the kit's command, which checks each against the store, not by hand."
  }
  assert {
    condition     = length(google_monitoring_alert_policy.dead_letter_backlog[0].notification_channels) == 0
    error_message = "Without channels nobody is notified (the incident is still opened)."
  }
}

run "failed_deliveries_alert" {
  command = apply

  assert {
    condition     = length(google_monitoring_alert_policy.failed_deliveries) == 1
    error_message = "By default there is an alert policy on failed deliveries."
  }
  assert {
    condition = alltrue([for term in [
      "resource.type = \"cloud_run_revision\"",
      "metric.type = \"logging.googleapis.com/user/${google_logging_metric.store_deliveries.name}\"",
      "metric.labels.outcome = \"failed\"",
    ] : strcontains(google_monitoring_alert_policy.failed_deliveries[0].conditions[0].condition_threshold[0].filter, term)])
    error_message = "The failed-deliveries alert counts the deliveries metric's failed outcome."
  }
  assert {
    condition     = google_monitoring_alert_policy.failed_deliveries[0].conditions[0].condition_threshold[0].aggregations[0].per_series_aligner == "ALIGN_SUM" && google_monitoring_alert_policy.failed_deliveries[0].conditions[0].condition_threshold[0].aggregations[0].cross_series_reducer == "REDUCE_SUM" && google_monitoring_alert_policy.failed_deliveries[0].conditions[0].condition_threshold[0].aggregations[0].alignment_period == "300s"
    error_message = "Failed deliveries are summed over a 5-minute window, all revisions together."
  }
  assert {
    condition     = google_monitoring_alert_policy.failed_deliveries[0].conditions[0].condition_threshold[0].comparison == "COMPARISON_GT" && google_monitoring_alert_policy.failed_deliveries[0].conditions[0].condition_threshold[0].threshold_value == 0
    error_message = "Default: any failed delivery."
  }
  assert {
    condition     = alltrue([for p in concat(google_monitoring_alert_policy.failed_deliveries, google_monitoring_alert_policy.dead_letter_backlog) : p.conditions[0].condition_threshold[0].evaluation_missing_data == "EVALUATION_MISSING_DATA_INACTIVE"])
    error_message = "No data (no failure logged, no sample yet) counts as the condition not met."
  }
  assert {
    condition     = strcontains(google_monitoring_alert_policy.failed_deliveries[0].documentation[0].content, "jsonPayload.outcome=\"failed\"") && google_monitoring_alert_policy.failed_deliveries[0].documentation[0].mime_type == "text/markdown"
    error_message = "The failed-deliveries alert's documentation says where to find the failures."
  }
  assert {
    condition     = output.alert_policies.dead_letter_backlog == google_monitoring_alert_policy.dead_letter_backlog[0].name && output.alert_policies.failed_deliveries == google_monitoring_alert_policy.failed_deliveries[0].name
    error_message = "Outputs name both alert policies."
  }
}

run "alert_settings_and_channels_flow_through" {
  command = apply

  variables {
    alerts = {
      dead_letter_backlog_above        = 10
      dead_letter_minutes              = 15
      failed_deliveries_above          = 3
      failed_deliveries_window_minutes = 10
    }
    alert_notification_channels = ["1234567890", "projects/other-project/notificationChannels/987654321"]
  }

  assert {
    condition     = google_monitoring_alert_policy.dead_letter_backlog[0].conditions[0].condition_threshold[0].threshold_value == 10 && google_monitoring_alert_policy.dead_letter_backlog[0].conditions[0].condition_threshold[0].duration == "900s"
    error_message = "The backlog threshold and its minutes reach the condition."
  }
  assert {
    condition     = google_monitoring_alert_policy.failed_deliveries[0].conditions[0].condition_threshold[0].threshold_value == 3 && google_monitoring_alert_policy.failed_deliveries[0].conditions[0].condition_threshold[0].aggregations[0].alignment_period == "600s"
    error_message = "The failed-deliveries threshold and window reach the condition."
  }
  assert {
    condition = alltrue([for p in concat(google_monitoring_alert_policy.dead_letter_backlog, google_monitoring_alert_policy.failed_deliveries) : p.notification_channels == tolist([
      "projects/visitkit-test/notificationChannels/1234567890",
      "projects/other-project/notificationChannels/987654321",
    ])])
    error_message = "A channel id is named in the deployment's project, a full name is kept as it is, in both policies."
  }
}

run "alerts_can_be_turned_off" {
  command = plan

  variables {
    alerts = { enabled = false }
  }

  assert {
    condition     = length(google_monitoring_alert_policy.dead_letter_backlog) == 0 && length(google_monitoring_alert_policy.failed_deliveries) == 0
    error_message = "alerts.enabled = false creates no alert policy."
  }
  assert {
    condition     = output.alert_policies.dead_letter_backlog == null && output.alert_policies.failed_deliveries == null
    error_message = "Without alert policies their outputs are null."
  }
}

# Pull mode: the runbook says why a visit must not be published again by hand, and what the replay checks.
run "pull_mode_runbook_names_the_batches" {
  command = plan

  variables {
    store_mode = "pull"
    functions = {
      "serve-page"        = { max_instances = 2, concurrency = 1 }
      "get-counter"       = { max_instances = 2, concurrency = 1 }
      "inc-counter"       = { max_instances = 2, concurrency = 1 }
      "store-inc-counter" = { max_instances = 1, min_instances = 1, concurrency = 1 }
    }
  }

  assert {
    condition = alltrue([for text in [
      "scripts/kit replay-dead-letters ITERATION --project visitkit-test",
      "the visit_batches documents",
      "within pull.dedup_window_minutes (60)",
    ] : strcontains(google_monitoring_alert_policy.dead_letter_backlog[0].documentation[0].content, text)])
    error_message = "In pull mode the runbook names the replay, the batch documents it checks and the window that makes a hand-made republish count twice."
  }
}

run "without_dead_letter_no_backlog_alert" {
  command = apply

  variables {
    dead_letter = false
  }

  assert {
    condition     = length(google_monitoring_alert_policy.dead_letter_backlog) == 0 && output.alert_policies.dead_letter_backlog == null
    error_message = "With dead_letter = false there is no dead-letter subscription, so no alert on its backlog, and its output is null."
  }
  assert {
    condition     = length(google_monitoring_alert_policy.failed_deliveries) == 1 && output.alert_policies.failed_deliveries == google_monitoring_alert_policy.failed_deliveries[0].name
    error_message = "The failed-deliveries alert does not depend on dead lettering."
  }
  assert {
    condition     = !strcontains(google_monitoring_alert_policy.failed_deliveries[0].documentation[0].content, "dead-lettered") && strcontains(google_monitoring_alert_policy.failed_deliveries[0].documentation[0].content, "retried until it expires, 86400 s after it was published")
    error_message = "Without dead lettering the failed-deliveries documentation says a failing visit is retried until it expires, not that it is dead-lettered."
  }
}

run "with_dead_letter_the_failed_alert_names_it" {
  command = plan

  assert {
    condition     = strcontains(google_monitoring_alert_policy.failed_deliveries[0].documentation[0].content, "after 20 attempts it is dead-lettered (the other alert)")
    error_message = "With dead lettering the failed-deliveries documentation points at the other alert."
  }
}

run "the_failed_alert_waits_for_its_metric" {
  command = plan

  # The policy names the metric's type from the metric resource (an implicit dependency), and
  # alerts.tf lists the metric in depends_on: Cloud Monitoring refuses an alert on a user metric it
  # does not know yet (404 "Cannot find metric(s) that match type ...").
  assert {
    condition     = strcontains(google_monitoring_alert_policy.failed_deliveries[0].conditions[0].condition_threshold[0].filter, google_logging_metric.store_deliveries.name) && length(regexall("depends_on\\s*=\\s*\\[[^\\]]*google_logging_metric\\.store_deliveries", file("alerts.tf"))) == 1
    error_message = "The failed-deliveries alert policy must depend on the deliveries metric."
  }
}

run "bad_notification_channel" {
  command = plan
  variables {
    alert_notification_channels = ["my-email-channel"]
  }
  expect_failures = [var.alert_notification_channels]
}

run "notification_channel_of_another_kind" {
  command = plan
  variables {
    alert_notification_channels = ["projects/visitkit-test/alertPolicies/123"]
  }
  expect_failures = [var.alert_notification_channels]
}

run "negative_alert_threshold" {
  command = plan
  variables {
    alerts = { failed_deliveries_above = -1 }
  }
  expect_failures = [var.alerts]
}

run "fractional_alert_threshold" {
  command = plan
  variables {
    alerts = { dead_letter_backlog_above = 0.5 }
  }
  expect_failures = [var.alerts]
}

run "alert_minutes_zero" {
  command = plan
  variables {
    alerts = { dead_letter_minutes = 0 }
  }
  expect_failures = [var.alerts]
}

run "alert_window_above_an_hour" {
  command = plan
  variables {
    alerts = { failed_deliveries_window_minutes = 61 }
  }
  expect_failures = [var.alerts]
}
