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
    # in logging.tf filter on it too). Not service_config.service: that is the full
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
