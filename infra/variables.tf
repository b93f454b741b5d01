# Names and types match iterations/iteration-N/settings.tfvars.json, which the
# local stack (scripts/visitkit/settings.py) reads too: keep both in step.

variable "project_id" {
  description = "Google Cloud project to deploy into (it must exist and have billing enabled)."
  type        = string

  validation {
    # Google's rule for project ids: 6-30 characters, lower case letters, digits, hyphens.
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a Google Cloud project id: 6-30 lower case letters, digits or hyphens, starting with a letter."
  }
}

variable "region" {
  description = "Region of the functions, the source bucket and the Firestore database (the study used southamerica-east1)."
  type        = string
  default     = "southamerica-east1"

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must be a Google Cloud region name such as southamerica-east1."
  }
}

variable "shards_per_page" {
  description = "Counter shards per page: store-inc-counter increments one at random, get-counter sums them all."
  type        = number

  validation {
    condition     = var.shards_per_page >= 1 && floor(var.shards_per_page) == var.shards_per_page
    error_message = "shards_per_page must be a whole number >= 1."
  }
}

variable "cache_ttl_seconds" {
  description = "How long get-counter keeps a page's total in memory; 0 turns the cache off."
  type        = number

  validation {
    condition     = var.cache_ttl_seconds >= 0 && floor(var.cache_ttl_seconds) == var.cache_ttl_seconds
    error_message = "cache_ttl_seconds must be a whole number >= 0."
  }
}

variable "marker_ttl_days" {
  description = "Lifetime of store-inc-counter's dedup markers (Firestore TTL on processed_messages.expire_at)."
  type        = number
  default     = 7

  validation {
    condition     = var.marker_ttl_days >= 1 && floor(var.marker_ttl_days) == var.marker_ttl_days
    error_message = "marker_ttl_days must be a whole number >= 1."
  }
}

variable "topic_name" {
  description = "Short name of the Pub/Sub topic inc-counter publishes visits to."
  type        = string
  default     = "visits"

  validation {
    condition     = can(regex("^[a-zA-Z][a-zA-Z0-9._~+%-]{2,254}$", var.topic_name)) && !startswith(lower(var.topic_name), "goog")
    error_message = "topic_name must be a valid Pub/Sub topic name (3-255 characters, starting with a letter, not with \"goog\")."
  }
}

variable "functions" {
  description = <<-EOT
    Per function knobs, keyed by the logical names serve-page, get-counter, inc-counter and
    store-inc-counter (all four, nothing else). memory is e.g. "256M"; cpu is e.g. "0.167" or "1"
    and, when left out, is "1" for concurrency above 1 (2nd gen functions need at least 1 vCPU to
    serve concurrent requests) and "0.167" otherwise. timeout_seconds is 1 to 3600. min_instances
    (default 0) instances stay warm, and billed, without requests.
  EOT
  type = map(object({
    max_instances   = number
    concurrency     = number
    memory          = optional(string, "256M")
    cpu             = optional(string)
    timeout_seconds = optional(number, 60)
    min_instances   = optional(number, 0)
  }))

  validation {
    condition     = toset(keys(var.functions)) == toset(["serve-page", "get-counter", "inc-counter", "store-inc-counter"])
    error_message = "functions must have exactly the keys serve-page, get-counter, inc-counter and store-inc-counter."
  }

  validation {
    condition     = alltrue([for f in values(var.functions) : f.max_instances >= 1 && f.max_instances <= 1000 && floor(f.max_instances) == f.max_instances])
    error_message = "Each function's max_instances must be a whole number from 1 to 1000."
  }

  validation {
    condition     = alltrue([for f in values(var.functions) : f.concurrency >= 1 && f.concurrency <= 1000 && floor(f.concurrency) == f.concurrency])
    error_message = "Each function's concurrency must be a whole number from 1 to 1000."
  }

  validation {
    condition     = alltrue([for f in values(var.functions) : f.timeout_seconds >= 1 && f.timeout_seconds <= 3600 && floor(f.timeout_seconds) == f.timeout_seconds])
    error_message = "Each function's timeout_seconds must be a whole number from 1 to 3600."
  }

  validation {
    condition     = alltrue([for f in values(var.functions) : f.min_instances >= 0 && f.min_instances <= 1000 && floor(f.min_instances) == f.min_instances && f.min_instances <= f.max_instances])
    error_message = "Each function's min_instances must be a whole number from 0 to 1000, not above its max_instances."
  }

  validation {
    condition     = alltrue([for f in values(var.functions) : can(regex("^[1-9][0-9]*(M|Mi|G|Gi)$", f.memory))])
    error_message = "Each function's memory must look like \"256M\", \"512Mi\" or \"1G\"."
  }

  validation {
    condition     = alltrue([for f in values(var.functions) : f.cpu == null || try(tonumber(f.cpu) > 0 && tonumber(f.cpu) <= 8, false)])
    error_message = "Each function's cpu must be a number of vCPUs from above 0 to 8, written as a string such as \"0.167\" or \"1\"."
  }

  validation {
    condition     = alltrue([for f in values(var.functions) : f.concurrency == 1 || f.cpu == null || try(tonumber(f.cpu) >= 1, false)])
    error_message = "A function with concurrency above 1 needs cpu of at least \"1\" (a 2nd gen function with less than 1 vCPU serves one request at a time)."
  }

  # Cloud Run's CPU/memory rules, on the effective cpu: cpu if set, else "1" when concurrency
  # is above 1, else "0.167" (as local.cpu in main.tf). Memory units: M = 10^6 bytes,
  # Mi = 2^20, G = 10^9, Gi = 2^30. A value the rules above already reject passes here (try).
  validation {
    condition = alltrue([for f in values(var.functions) : try(
      tonumber(regex("^([0-9]+)(M|Mi|G|Gi)$", f.memory)[0]) * { M = 1000000, Mi = 1048576, G = 1000000000, Gi = 1073741824 }[regex("^([0-9]+)(M|Mi|G|Gi)$", f.memory)[1]] <= 536870912
      || tonumber(coalesce(f.cpu, f.concurrency > 1 ? "1" : "0.167")) >= 0.5,
    true)])
    error_message = "A function with memory above 512 MiB needs cpu of at least \"0.5\" (Cloud Run's rule)."
  }

  validation {
    condition = alltrue([for f in values(var.functions) : try(
      tonumber(regex("^([0-9]+)(M|Mi|G|Gi)$", f.memory)[0]) * { M = 1000000, Mi = 1048576, G = 1000000000, Gi = 1073741824 }[regex("^([0-9]+)(M|Mi|G|Gi)$", f.memory)[1]] <= 1073741824
      || tonumber(coalesce(f.cpu, f.concurrency > 1 ? "1" : "0.167")) >= 1,
    true)])
    error_message = "A function with memory above 1 GiB needs cpu of at least \"1\" (Cloud Run's rule)."
  }

  validation {
    condition = alltrue([for f in values(var.functions) : try(
      tonumber(coalesce(f.cpu, f.concurrency > 1 ? "1" : "0.167")) <= 1
      || floor(tonumber(coalesce(f.cpu, f.concurrency > 1 ? "1" : "0.167"))) == tonumber(coalesce(f.cpu, f.concurrency > 1 ? "1" : "0.167")),
    true)])
    error_message = "A function's cpu above \"1\" must be a whole number of vCPUs, such as \"2\" or \"4\" (Cloud Run's rule)."
  }
}

variable "subscription" {
  description = <<-EOT
    store-inc-counter's push subscription on the topic. ack_deadline_seconds (10 to 600) is also
    the push request's timeout; a failed push is retried after minimum_backoff_seconds, growing
    to maximum_backoff_seconds (0 to 600), until max_delivery_attempts (5 to 100) when the
    message goes to the dead-letter topic (with dead_letter = true; without it a failing message
    is retried until it expires); a 429 at max instances counts as a failed attempt, so keep it
    high. message_retention_seconds (600 to 604800) keeps undelivered messages.
  EOT
  type = object({
    ack_deadline_seconds      = optional(number, 60)
    minimum_backoff_seconds   = optional(number, 10)
    maximum_backoff_seconds   = optional(number, 600)
    max_delivery_attempts     = optional(number, 20)
    message_retention_seconds = optional(number, 86400)
  })
  default = {}

  validation {
    condition     = var.subscription.ack_deadline_seconds >= 10 && var.subscription.ack_deadline_seconds <= 600 && floor(var.subscription.ack_deadline_seconds) == var.subscription.ack_deadline_seconds
    error_message = "subscription.ack_deadline_seconds must be a whole number from 10 to 600."
  }

  validation {
    condition = alltrue([
      for s in [var.subscription.minimum_backoff_seconds, var.subscription.maximum_backoff_seconds] : s >= 0 && s <= 600 && floor(s) == s
    ]) && var.subscription.minimum_backoff_seconds <= var.subscription.maximum_backoff_seconds
    error_message = "subscription.minimum_backoff_seconds and subscription.maximum_backoff_seconds must be whole numbers from 0 to 600, the minimum not above the maximum."
  }

  validation {
    condition     = var.subscription.max_delivery_attempts >= 5 && var.subscription.max_delivery_attempts <= 100 && floor(var.subscription.max_delivery_attempts) == var.subscription.max_delivery_attempts
    error_message = "subscription.max_delivery_attempts must be a whole number from 5 to 100."
  }

  validation {
    condition     = var.subscription.message_retention_seconds >= 600 && var.subscription.message_retention_seconds <= 604800 && floor(var.subscription.message_retention_seconds) == var.subscription.message_retention_seconds
    error_message = "subscription.message_retention_seconds must be a whole number from 600 (10 minutes) to 604800 (7 days)."
  }
}

variable "access" {
  description = <<-EOT
    Who may call the three HTTP functions. "public": everyone (allUsers), as the study ran and as a
    browser needs. "authenticated": only the principals in invokers, each request carrying a
    Google-signed ID token; use it where an organization policy (iam.allowedPolicyMemberDomains,
    enforced by default in organizations created since May 2024) refuses allUsers. "auto": the
    kit's runner reads the organization policy and passes -var=access=public or
    -var=access=authenticated itself; plain Terraform (e.g. a manual destroy with an iteration's
    settings file) treats "auto" as "public" (local.access in main.tf).
  EOT
  type        = string
  default     = "public"

  validation {
    condition     = contains(["auto", "public", "authenticated"], var.access)
    error_message = "access must be \"auto\" (the kit chooses public or authenticated from the organization policy; Terraform alone treats auto as public), \"public\" (anyone may call the three HTTP functions) or \"authenticated\" (only the accounts in invokers, with a Google-signed ID token)."
  }
}

variable "dead_letter" {
  description = <<-EOT
    true (the default): a visit Pub/Sub could not push to store-inc-counter after
    subscription.max_delivery_attempts goes to the dead-letter topic TOPIC-dead-letter and waits
    in its pull subscription TOPIC-dead-letter-pull (7 days), where the runner counts it and an
    alert watches it; Pub/Sub's service agent (service-NUMBER@gcp-sa-pubsub.iam.gserviceaccount.com)
    is granted what that needs, on those resources only. false: no dead-letter policy, topic,
    subscription or alert, and no grant at all names Pub/Sub's service agent, for organizations
    whose iam.allowedPolicyMemberDomains refuses grants to Google's service agents; a delivery that
    always fails is then retried until the message expires (subscription.message_retention_seconds)
    and is neither dead-lettered nor counted as such. Also read from an iteration's settings file.
  EOT
  type        = bool
  default     = true
}

variable "build_grants_wait_seconds" {
  description = <<-EOT
    Seconds to wait, once the build account's roles are granted (or changed), before the first
    function is built: new IAM grants can take a minute or two to propagate, and a build started
    sooner may be refused. 0 to 600, default 60 (as the google provider's own example for a custom
    build account). The wait is a local `sleep` (it needs a POSIX shell where Terraform runs); it
    runs again only when those grants change. 0 waits not at all.
  EOT
  type        = number
  default     = 60
  nullable    = false

  validation {
    condition     = var.build_grants_wait_seconds >= 0 && var.build_grants_wait_seconds <= 600 && floor(var.build_grants_wait_seconds) == var.build_grants_wait_seconds
    error_message = "build_grants_wait_seconds must be a whole number of seconds from 0 to 600."
  }
}

variable "invokers" {
  description = <<-EOT
    With access = "authenticated": the principals granted roles/run.invoker on the three HTTP
    functions, e.g. ["user:me@example.com"] or ["serviceAccount:loadgen@P.iam.gserviceaccount.com"]
    (scripts/run-iteration fills it from your credentials). Project Owners, Editors and Cloud Run
    Admins and Invokers may invoke without it. Ignored with access = "public".
  EOT
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for m in var.invokers : can(regex("^(user|serviceAccount|group|domain|principal|principalSet):[^\\s]+$", m))])
    error_message = "Each of invokers must be an IAM principal such as \"user:me@example.com\" or \"serviceAccount:loadgen@my-project.iam.gserviceaccount.com\"."
  }
}

variable "load_generator_users" {
  description = <<-EOT
    With access = "authenticated": principals (e.g. ["user:me@example.com"]) that may act as the
    load-generator service account visitkit-loadgen, created when this list is not empty and
    granted run.invoker on the three HTTP functions. A user login cannot mint ID tokens for a
    function by itself; through this account it can (scripts/run-iteration fills it for a user
    login). Ignored with access = "public".
  EOT
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for m in var.load_generator_users : can(regex("^(user|serviceAccount|group|domain|principal|principalSet):[^\\s]+$", m))])
    error_message = "Each of load_generator_users must be an IAM principal such as \"user:me@example.com\"."
  }
}

variable "alerts" {
  description = <<-EOT
    Two Cloud Monitoring alert policies (enabled = false creates neither). The dead-letter backlog:
    visits Pub/Sub gave up on wait in the dead-letter pull subscription; the policy fires when that
    backlog stays above dead_letter_backlog_above (default 0, i.e. any visit) for
    dead_letter_minutes (1 to 60, default 5). Failed deliveries: store-inc-counter's "failed"
    outcome (Firestore failed; Pub/Sub redelivers) counted over failed_deliveries_window_minutes
    (1 to 60, default 5); the policy fires when the count is above failed_deliveries_above
    (default 0). Notifications go to alert_notification_channels.
  EOT
  type = object({
    enabled                          = optional(bool, true)
    dead_letter_backlog_above        = optional(number, 0)
    dead_letter_minutes              = optional(number, 5)
    failed_deliveries_above          = optional(number, 0)
    failed_deliveries_window_minutes = optional(number, 5)
  })
  default = {}

  validation {
    condition = alltrue([
      for n in [var.alerts.dead_letter_backlog_above, var.alerts.failed_deliveries_above] : n >= 0 && floor(n) == n
    ])
    error_message = "alerts.dead_letter_backlog_above and alerts.failed_deliveries_above must be whole numbers >= 0 (a count of visits)."
  }

  # Alert conditions take durations in whole minutes (Cloud Monitoring refuses others).
  validation {
    condition = alltrue([
      for m in [var.alerts.dead_letter_minutes, var.alerts.failed_deliveries_window_minutes] : m >= 1 && m <= 60 && floor(m) == m
    ])
    error_message = "alerts.dead_letter_minutes and alerts.failed_deliveries_window_minutes must be whole numbers of minutes from 1 to 60."
  }
}

variable "alert_notification_channels" {
  description = <<-EOT
    Cloud Monitoring notification channels the alert policies notify, each a channel id
    ("1234567890123456789", in this project) or its full name
    ("projects/PROJECT/notificationChannels/ID"); `gcloud beta monitoring channels list` shows
    them. Empty (the default): incidents are opened and shown in the console, nobody is notified.
  EOT
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for c in var.alert_notification_channels : can(regex("^([0-9]+|projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/notificationChannels/[0-9]+)$", c))])
    error_message = "Each of alert_notification_channels must be a notification channel id (digits) or a full name such as \"projects/my-project/notificationChannels/1234567890\"."
  }
}

variable "cors_allowed_origins" {
  description = <<-EOT
    Origins of other sites whose pages may call get-counter and inc-counter from a browser, e.g.
    ["https://www.example.com"]; passed to the three public functions as CORS_ALLOWED_ORIGINS,
    comma-separated. Empty (the default): no cross-origin caller; the kit's own page needs none,
    as it is served from the same origin as the APIs. Each must be an https origin: scheme and
    host (lower case) and an optional port, with no path, no trailing slash and no wildcard.
  EOT
  type        = list(string)
  default     = []

  validation {
    condition = alltrue([
      for o in var.cors_allowed_origins : can(regex("^https://([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(:[0-9]{1,5})?$", o))
    ])
    error_message = "Each of cors_allowed_origins must be an https origin such as \"https://www.example.com\" or \"https://app.example.com:8443\": lower case, no path, no trailing slash, no wildcard."
  }

  validation {
    condition     = length(distinct(var.cors_allowed_origins)) == length(var.cors_allowed_origins)
    error_message = "cors_allowed_origins lists an origin twice."
  }
}

variable "edge_protection" {
  description = <<-EOT
    An external Application Load Balancer with a Cloud Armor rate limit in front of serve-page,
    get-counter and inc-counter (enabled = false, the default, creates none of it). When enabled:
    one serverless NEG and backend service per public function, routed by path as their own URLs
    (/app, /get-counter, /inc-counter); a security policy that answers 429 to a client IP above
    requests_per_minute (1 to 10000, default 120) to one function, with action "throttle"
    (default: requests above the limit are refused, the rest pass) or "rate_based_ban" (the IP
    stays refused for ban_duration_seconds, 60 to 86400, default 600, after its rate falls back;
    Cloud Armor cannot turn a ban rule back into a throttle rule); a global address, HTTPS with a
    Google-managed certificate for domain when it is set (its DNS A record must point at the
    address), plain HTTP on the address otherwise; and the three functions' ingress restricted to
    internal traffic and Cloud Load Balancing, so their own URLs no longer answer the internet.
    Meant for a public deployment, not for the study's load tests: Locust's few IPs would be
    limited.
  EOT
  type = object({
    enabled              = optional(bool, false)
    requests_per_minute  = optional(number, 120)
    action               = optional(string, "throttle")
    ban_duration_seconds = optional(number, 600)
    domain               = optional(string, "")
  })
  default = {}

  validation {
    # Cloud Armor's threshold count is 1 to 10,000 for a rate-based ban (1,000,000 for throttle).
    condition     = var.edge_protection.requests_per_minute >= 1 && var.edge_protection.requests_per_minute <= 10000 && floor(var.edge_protection.requests_per_minute) == var.edge_protection.requests_per_minute
    error_message = "edge_protection.requests_per_minute must be a whole number from 1 to 10000."
  }

  validation {
    condition     = contains(["throttle", "rate_based_ban"], var.edge_protection.action)
    error_message = "edge_protection.action must be \"throttle\" or \"rate_based_ban\"."
  }

  validation {
    condition     = var.edge_protection.ban_duration_seconds >= 60 && var.edge_protection.ban_duration_seconds <= 86400 && floor(var.edge_protection.ban_duration_seconds) == var.edge_protection.ban_duration_seconds
    error_message = "edge_protection.ban_duration_seconds must be a whole number of seconds from 60 to 86400."
  }

  validation {
    condition     = var.edge_protection.domain == "" || (length(var.edge_protection.domain) <= 253 && can(regex("^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\\.)+[a-z]([a-z0-9-]{0,61}[a-z0-9])?$", var.edge_protection.domain)))
    error_message = "edge_protection.domain must be empty or a lower-case DNS name such as \"visits.example.com\" (no scheme, port, path or trailing dot)."
  }
}

variable "page_idle_seconds" {
  description = <<-EOT
    serve-page's PAGE_IDLE_SECONDS: a page nobody has touched (pointer, key, scroll, touch, focus) for this
    many seconds stops re-reading its count until the next touch, so a tab left open all day does not read
    all day. 0 to 86400, default 600; 0 never stops. Also read from an iteration's settings file (the local
    twin gives its serve-page the same).
  EOT
  type        = number
  default     = 600
  nullable    = false

  validation {
    condition     = var.page_idle_seconds >= 0 && var.page_idle_seconds <= 86400 && floor(var.page_idle_seconds) == var.page_idle_seconds
    error_message = "page_idle_seconds must be a whole number of seconds from 0 (the page never stops reading) to 86400 (a day)."
  }
}

variable "log_exclusions" {
  description = <<-EOT
    Shares of the busiest log entries Cloud Logging drops instead of storing (and billing), as exclusion
    filters on the project's _Default sink; 0 (the default) keeps every entry, 100 drops every matching one.
    successful_requests_percent: the request log entries (run.googleapis.com/requests) of the four
    functions' Cloud Run services whose status is 2xx or 3xx; every 4xx and 5xx (429 included) and every
    entry without a status is kept. counted_deliveries_percent: store-inc-counter's "visit message" lines
    whose outcome is counted; every already_counted, malformed and failed line is kept. Whole numbers 0 to
    100. The log-based metrics the runner and the alerts read count every entry all the same (README.md,
    "Log exclusions").
  EOT
  type = object({
    successful_requests_percent = optional(number, 0)
    counted_deliveries_percent  = optional(number, 0)
  })
  default  = {}
  nullable = false

  validation {
    condition = alltrue([
      for p in [var.log_exclusions.successful_requests_percent, var.log_exclusions.counted_deliveries_percent] : p >= 0 && p <= 100 && floor(p) == p
    ])
    error_message = "log_exclusions.successful_requests_percent and log_exclusions.counted_deliveries_percent must be whole numbers from 0 (keep every entry) to 100 (drop every matching one)."
  }
}

# Iteration 7's pull store and embedded count (issue 41). Both default to iterations 0-6's behaviour.
# The messages are word for word those of scripts/visitkit/settings.py's MESSAGES.
variable "store_mode" {
  description = <<-EOT
    How store-inc-counter receives visits. "push" (the default): Pub/Sub pushes each visit to the
    function, one request per visit. "pull": store-inc-counter is a Cloud Run service of one always-on
    instance that pulls visits in batches from the same subscription (then a pull subscription) and
    commits each batch in one Firestore transaction; it then needs max_instances 1 and min_instances 1.
  EOT
  type        = string
  default     = "push"
  nullable    = false

  validation {
    condition     = contains(["push", "pull"], var.store_mode)
    error_message = "store_mode must be \"push\" (Pub/Sub pushes each visit to store-inc-counter) or \"pull\" (store-inc-counter pulls visits in batches)."
  }

  # One writer (the puller's lease) that runs without requests.
  validation {
    condition     = var.store_mode != "pull" || try(var.functions["store-inc-counter"].max_instances == 1 && var.functions["store-inc-counter"].min_instances == 1, false)
    error_message = "With store_mode \"pull\", store-inc-counter must have max_instances 1 and min_instances 1 (one writer, running without requests)."
  }
}

variable "pull" {
  description = <<-EOT
    The puller's knobs, read only with store_mode = "pull": batch_size (1 to 1000, default 500) messages
    per pull and per Firestore commit at most; flush_ms (10 to 10000, default 500) how long a partial
    batch waits before it is committed (the latency to a visible count); dedup_window_minutes (10 to
    1440, default 60) the horizon: a repeat of a visit id is refused when its copies were published
    within this many minutes of each other.
  EOT
  type = object({
    batch_size           = optional(number, 500)
    flush_ms             = optional(number, 500)
    dedup_window_minutes = optional(number, 60)
  })
  default  = {}
  nullable = false

  validation {
    # [value, lowest, highest]; a null (an explicit null in a settings file) fails too.
    condition = alltrue([for check in [
      [var.pull.batch_size, 1, 1000],
      [var.pull.flush_ms, 10, 10000],
      [var.pull.dedup_window_minutes, 10, 1440],
    ] : try(check[0] >= check[1] && check[0] <= check[2] && floor(check[0]) == check[0], false)])
    error_message = "pull.batch_size must be a whole number from 1 to 1000, pull.flush_ms from 10 to 10000 and pull.dedup_window_minutes from 10 to 1440."
  }
}

variable "page_embeds_count" {
  description = "true: serve-page puts the cached count into the page it serves, which then makes no first get-counter read (re-reads go on as before). false (the default): the page reads its count from get-counter."
  type        = bool
  default     = false

  validation {
    condition     = var.page_embeds_count != null
    error_message = "page_embeds_count must be true or false."
  }
}

# The local twin's alone (scripts/visitkit/settings.py, SCALING_MODES): declared so that a settings file that sets it
# plans without an "undeclared variable" warning, and checked with the twin's own words. Nothing here reads it.
# tflint-ignore: terraform_unused_declarations
variable "scaling" {
  description = <<-EOT
    The local twin's only: how it runs each function's instances. "fixed" (the default): all max_instances
    of them up from the first request to the last; "auto": the twin's autoscaler starts and stops them
    between min_instances and max_instances, by Cloud Run's rules. Ignored here: Cloud Run always
    autoscales each function between its min_instances and max_instances.
  EOT
  type        = string
  default     = "fixed"
  nullable    = false

  validation {
    condition     = contains(["fixed", "auto"], var.scaling)
    error_message = "scaling must be \"fixed\" (every instance up all the time) or \"auto\" (the twin's autoscaler starts and stops them)."
  }
}
