output "base_url" {
  description = "Base URL of the functions, as the Locust suite and the pages use it: BASE/app, BASE/get-counter, BASE/inc-counter."
  value       = local.base_url
}

output "function_urls" {
  description = "URL of each function, by logical name (store-inc-counter's is not publicly invokable)."
  value       = { for key, f in google_cloudfunctions2_function.this : key => f.url }
}

output "topic_name" {
  description = "Short name of the Pub/Sub topic inc-counter publishes to."
  value       = google_pubsub_topic.visits.name
}

output "subscription_name" {
  description = "Short name of the push subscription Eventarc created on the topic for store-inc-counter (its backlog is the study's lag)."
  value       = element(split("/", google_eventarc_trigger.store_inc_counter.transport[0].pubsub[0].subscription), 3)
}

output "project_id" {
  description = "Project the kit is deployed in (for the metrics reader)."
  value       = var.project_id
}

output "region" {
  description = "Region of the functions."
  value       = var.region
}
