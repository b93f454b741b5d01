output "base_url" {
  description = "Base URL of the functions, as the Locust suite and the pages use it: BASE/app, BASE/get-counter, BASE/inc-counter. With edge_protection, the load balancer's (https://DOMAIN, or http://ADDRESS without a domain)."
  value       = local.public_base_url
}

output "edge_address" {
  description = "IP address of edge_protection's load balancer (point edge_protection.domain's DNS A record at it); null when edge_protection is off."
  value       = one(google_compute_global_address.edge[*].address)
}

output "function_urls" {
  description = "URL of each function, by logical name (store-inc-counter's is not publicly invokable; in pull mode, its Cloud Run service's)."
  value       = merge({ for key, f in google_cloudfunctions2_function.this : key => f.url }, { for s in google_cloud_run_v2_service.store_puller : "store-inc-counter" => s.uri })
}

output "function_audiences" {
  description = "Audience of each function's ID tokens, by logical name: its Cloud Run service's run.app URL, which Cloud Run always accepts (https://cloud.google.com/run/docs/configuring/custom-audiences), whatever URL the request goes to (base_url is the load balancer's with edge_protection). The kit and Locust mint for it with access = \"authenticated\"."
  value       = merge({ for key, f in google_cloudfunctions2_function.this : key => f.service_config[0].uri }, { for s in google_cloud_run_v2_service.store_puller : "store-inc-counter" => s.uri })
}

output "topic_name" {
  description = "Short name of the Pub/Sub topic inc-counter publishes to."
  value       = google_pubsub_topic.visits.name
}

output "subscription_name" {
  description = "Short name of store-inc-counter's subscription on the topic, push or (store_mode = \"pull\") pull; its backlog is the study's lag."
  value       = google_pubsub_subscription.store_inc_counter.name
}

output "dead_letter_topic_name" {
  description = "Short name of the topic Pub/Sub moves a visit to after subscription.max_delivery_attempts failed pushes; null with dead_letter = false (no such topic)."
  value       = one(google_pubsub_topic.dead_letter[*].name)
}

output "dead_letter_subscription_name" {
  description = "Short name of the pull subscription on the dead-letter topic (its backlog counts dead-lettered visits); null with dead_letter = false."
  value       = one(google_pubsub_subscription.dead_letter[*].name)
}

output "push_service_account" {
  description = "Email of the service account whose OIDC token the push subscription sends; the only invoker of store-inc-counter (unused in pull mode)."
  value       = google_service_account.push.email
}

output "build_service_account" {
  description = "Email of the service account Cloud Build runs the functions' builds as."
  value       = google_service_account.build.email
}

output "load_generator_service_account" {
  description = "Email of visitkit-loadgen, whose ID tokens the kit sends when a user login runs an authenticated deployment; null otherwise."
  value       = one(google_service_account.load_generator[*].email)
}

output "requests_429_metric_name" {
  description = "Log-based metric (logging.googleapis.com/user/NAME) counting requests Cloud Run refused with 429, label service_name."
  value       = google_logging_metric.requests_429.name
}

output "store_deliveries_metric_name" {
  description = "Log-based metric (logging.googleapis.com/user/NAME) counting store-inc-counter's deliveries, label outcome (counted, already_counted, malformed, failed); in pull mode its batches, by the batch's outcome."
  value       = google_logging_metric.store_deliveries.name
}

output "project_id" {
  description = "Project the kit is deployed in (for the metrics reader)."
  value       = var.project_id
}

output "region" {
  description = "Region of the functions."
  value       = var.region
}

output "alert_policies" {
  description = "Names (projects/P/alertPolicies/ID) of the alert policies on the dead-letter backlog and on failed deliveries; each null when alerts.enabled is false, the first also with dead_letter = false."
  value = {
    dead_letter_backlog = one(google_monitoring_alert_policy.dead_letter_backlog[*].name)
    failed_deliveries   = one(google_monitoring_alert_policy.failed_deliveries[*].name)
  }
}
