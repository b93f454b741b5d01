# edge_protection: off by default (nothing of the load balancer, today's ingress), on it puts a
# load balancer with a Cloud Armor rate limit per client IP in front of the three public
# functions and closes their own URLs to the internet. `command = apply` against the mocks where
# the checks follow ids from one resource to another.
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
  region            = "southamerica-east1"
  shards_per_page   = 2
  cache_ttl_seconds = 10
  functions = {
    "serve-page"        = { max_instances = 2, concurrency = 1 }
    "get-counter"       = { max_instances = 2, concurrency = 1 }
    "inc-counter"       = { max_instances = 2, concurrency = 1 }
    "store-inc-counter" = { max_instances = 2, concurrency = 1 }
  }
  # The apply run would otherwise really sleep (build.tftest.hcl tests the wait).
  build_grants_wait_seconds = 0
}

run "off_by_default" {
  command = plan

  assert {
    condition = (length(google_compute_region_network_endpoint_group.edge) + length(google_compute_backend_service.edge) + length(google_compute_security_policy.edge)
      + length(google_compute_url_map.edge) + length(google_compute_global_address.edge) + length(google_compute_managed_ssl_certificate.edge) + length(google_compute_ssl_policy.edge)
    + length(google_compute_target_https_proxy.edge) + length(google_compute_target_http_proxy.edge) + length(google_compute_global_forwarding_rule.edge)) == 0
    error_message = "Without edge_protection there is no load balancer, security policy or address."
  }
  assert {
    condition     = { for k, f in google_cloudfunctions2_function.this : k => f.service_config[0].ingress_settings } == { "serve-page" = "ALLOW_ALL", "get-counter" = "ALLOW_ALL", "inc-counter" = "ALLOW_ALL", "store-inc-counter" = "ALLOW_INTERNAL_ONLY" }
    error_message = "Without edge_protection the public functions keep ALLOW_ALL, store-inc-counter internal only."
  }
  assert {
    condition     = output.base_url == "https://southamerica-east1-visitkit-test.cloudfunctions.net" && google_cloudfunctions2_function.this["serve-page"].service_config[0].environment_variables.INC_COUNTER_URL == "https://southamerica-east1-visitkit-test.cloudfunctions.net/inc-counter"
    error_message = "Without edge_protection the page and base_url use the functions' own URLs."
  }
  assert {
    condition     = !contains(keys(google_project_service.this), "compute.googleapis.com") && output.edge_address == null
    error_message = "Without edge_protection the Compute Engine API is not turned on and there is no address."
  }
}

run "on_over_http" {
  command = apply

  variables {
    edge_protection = { enabled = true, requests_per_minute = 90 }
  }

  assert {
    condition     = toset(keys(google_compute_region_network_endpoint_group.edge)) == toset(["serve-page", "get-counter", "inc-counter"])
    error_message = "One serverless NEG per public function, none for store-inc-counter."
  }
  assert {
    condition     = { for k, neg in google_compute_region_network_endpoint_group.edge : k => [neg.network_endpoint_type, neg.region, neg.cloud_run[0].service] } == { for k, name in { "serve-page" = "app", "get-counter" = "get-counter", "inc-counter" = "inc-counter" } : k => ["SERVERLESS", "southamerica-east1", name] }
    error_message = "Each NEG is a serverless NEG, in the functions' region, on its function's Cloud Run service by its bare name (the function's)."
  }
  assert {
    condition     = alltrue([for k, b in google_compute_backend_service.edge : b.load_balancing_scheme == "EXTERNAL_MANAGED" && b.security_policy == google_compute_security_policy.edge[0].id && [for be in b.backend : be.group] == [google_compute_region_network_endpoint_group.edge[k].id] && b.health_checks == null])
    error_message = "Each backend service is the global external Application Load Balancer's, carries the security policy, has its function's NEG and no health check (serverless NEGs take none)."
  }
  assert {
    condition = alltrue([for r in google_compute_security_policy.edge[0].rule : r.action == "throttle" && r.rate_limit_options[0].enforce_on_key == "IP"
      && r.rate_limit_options[0].rate_limit_threshold[0].count == 90 && r.rate_limit_options[0].rate_limit_threshold[0].interval_sec == 60
    && r.rate_limit_options[0].exceed_action == "deny(429)" && r.rate_limit_options[0].conform_action == "allow" && r.rate_limit_options[0].ban_duration_sec == null if r.priority == 1000])
    error_message = "The security policy throttles each client IP to requests_per_minute per minute, refusing the rest with 429 (no ban by default)."
  }
  assert {
    condition     = [for r in google_compute_security_policy.edge[0].rule : r.action if r.priority == 2147483647] == ["allow"] && length(google_compute_security_policy.edge[0].rule) == 2 && length([for r in google_compute_security_policy.edge[0].rule : r if r.priority == 1000]) == 1
    error_message = "The security policy ends with the default allow rule and has nothing else."
  }
  assert {
    condition     = { for k, f in google_cloudfunctions2_function.this : k => f.service_config[0].ingress_settings } == { "serve-page" = "ALLOW_INTERNAL_AND_GCLB", "get-counter" = "ALLOW_INTERNAL_AND_GCLB", "inc-counter" = "ALLOW_INTERNAL_AND_GCLB", "store-inc-counter" = "ALLOW_INTERNAL_ONLY" }
    error_message = "Behind the load balancer the public functions take only its (and internal) traffic; store-inc-counter stays internal only."
  }
  assert {
    condition = toset(flatten([for pm in google_compute_url_map.edge[0].path_matcher : [for pr in pm.path_rule : [for p in pr.paths : "${p} ${pr.service}"]]])) == toset(flatten([
      for k, name in { "serve-page" = "app", "get-counter" = "get-counter", "inc-counter" = "inc-counter" } : ["/${name} ${google_compute_backend_service.edge[k].id}", "/${name}/* ${google_compute_backend_service.edge[k].id}"]
    ]))
    error_message = "The URL map routes /app, /get-counter and /inc-counter (and below) to their functions' backend services, as the functions' own URLs do, and nothing else."
  }
  assert {
    condition     = google_compute_url_map.edge[0].default_url_redirect[0].path_redirect == "/app" && google_compute_url_map.edge[0].path_matcher[0].default_url_redirect[0].path_redirect == "/app" && google_compute_url_map.edge[0].default_service == null
    error_message = "Any other path is redirected to the page, reaching no function."
  }
  assert {
    condition     = length(google_compute_target_http_proxy.edge) == 1 && length(google_compute_target_https_proxy.edge) == 0 && length(google_compute_managed_ssl_certificate.edge) == 0 && google_compute_target_http_proxy.edge[0].url_map == google_compute_url_map.edge[0].id
    error_message = "Without a domain: an HTTP proxy on the URL map, no certificate."
  }
  assert {
    condition     = google_compute_global_forwarding_rule.edge[0].target == google_compute_target_http_proxy.edge[0].id && google_compute_global_forwarding_rule.edge[0].port_range == "80" && google_compute_global_forwarding_rule.edge[0].load_balancing_scheme == "EXTERNAL_MANAGED" && google_compute_global_forwarding_rule.edge[0].ip_address == google_compute_global_address.edge[0].address
    error_message = "The forwarding rule sends port 80 of the global address to the HTTP proxy."
  }
  assert {
    condition     = output.base_url == "http://${google_compute_global_address.edge[0].address}" && output.edge_address == google_compute_global_address.edge[0].address
    error_message = "base_url is the load balancer's address."
  }
  assert {
    condition     = google_cloudfunctions2_function.this["serve-page"].service_config[0].environment_variables.INC_COUNTER_URL == "http://${google_compute_global_address.edge[0].address}/inc-counter" && google_cloudfunctions2_function.this["serve-page"].service_config[0].environment_variables.GET_COUNTER_URL == "http://${google_compute_global_address.edge[0].address}/get-counter"
    error_message = "The page calls the APIs through the load balancer (its own origin), not the closed function URLs."
  }
  assert {
    condition     = contains(keys(google_project_service.this), "compute.googleapis.com")
    error_message = "The load balancer's resources need the Compute Engine API."
  }
  assert {
    condition     = toset([for m in google_cloud_run_v2_service_iam_member.invoker : m.member]) == toset(["allUsers"])
    error_message = "The load balancer forwards anonymous requests: the public functions stay invokable by allUsers."
  }
}

run "on_over_https_with_a_domain" {
  command = apply

  variables {
    edge_protection = { enabled = true, domain = "visits.example.com" }
  }

  assert {
    condition     = google_compute_managed_ssl_certificate.edge[0].managed[0].domains == tolist(["visits.example.com"])
    error_message = "A Google-managed certificate for the domain."
  }
  assert {
    condition     = google_compute_target_https_proxy.edge[0].url_map == google_compute_url_map.edge[0].id && google_compute_target_https_proxy.edge[0].ssl_certificates == tolist([google_compute_managed_ssl_certificate.edge[0].id]) && google_compute_target_https_proxy.edge[0].ssl_policy == google_compute_ssl_policy.edge[0].id && length(google_compute_target_http_proxy.edge) == 0
    error_message = "With a domain: an HTTPS proxy with the certificate and the SSL policy, no HTTP proxy."
  }
  assert {
    condition     = google_compute_ssl_policy.edge[0].min_tls_version == "TLS_1_2" && google_compute_ssl_policy.edge[0].profile == "MODERN"
    error_message = "TLS 1.2 at least, the MODERN profile."
  }
  assert {
    condition     = google_compute_global_forwarding_rule.edge[0].target == google_compute_target_https_proxy.edge[0].id && google_compute_global_forwarding_rule.edge[0].port_range == "443"
    error_message = "The forwarding rule sends port 443 to the HTTPS proxy."
  }
  assert {
    condition     = output.base_url == "https://visits.example.com" && google_cloudfunctions2_function.this["serve-page"].service_config[0].environment_variables.INC_COUNTER_URL == "https://visits.example.com/inc-counter"
    error_message = "base_url and the page's API URLs are on the domain."
  }
  assert {
    condition     = [for r in google_compute_security_policy.edge[0].rule : r.rate_limit_options[0].rate_limit_threshold[0].count if r.priority == 1000] == [120]
    error_message = "Default rate limit: 120 requests per minute per client IP."
  }
}

run "rate_based_ban" {
  command = plan

  variables {
    edge_protection = { enabled = true, action = "rate_based_ban", requests_per_minute = 300, ban_duration_seconds = 900 }
  }

  assert {
    condition     = [for r in google_compute_security_policy.edge[0].rule : [r.action, r.rate_limit_options[0].rate_limit_threshold[0].count, r.rate_limit_options[0].ban_duration_sec, r.rate_limit_options[0].enforce_on_key] if r.priority == 1000] == [["rate_based_ban", 300, 900, "IP"]]
    error_message = "action = rate_based_ban bans an IP for ban_duration_seconds after it exceeded the limit."
  }
}

run "bad_rate_limit" {
  command = plan
  variables {
    edge_protection = { enabled = true, requests_per_minute = 0 }
  }
  expect_failures = [var.edge_protection]
}

run "rate_limit_above_what_cloud_armor_takes" {
  command = plan
  variables {
    edge_protection = { enabled = true, requests_per_minute = 10001 }
  }
  expect_failures = [var.edge_protection]
}

run "unknown_edge_action" {
  command = plan
  variables {
    edge_protection = { enabled = true, action = "deny" }
  }
  expect_failures = [var.edge_protection]
}

run "ban_too_short" {
  command = plan
  variables {
    edge_protection = { enabled = true, action = "rate_based_ban", ban_duration_seconds = 30 }
  }
  expect_failures = [var.edge_protection]
}

run "domain_with_a_scheme" {
  command = plan
  variables {
    edge_protection = { enabled = true, domain = "https://visits.example.com" }
  }
  expect_failures = [var.edge_protection]
}

run "domain_without_a_dot" {
  command = plan
  variables {
    edge_protection = { enabled = true, domain = "localhost" }
  }
  expect_failures = [var.edge_protection]
}
