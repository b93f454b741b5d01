# Nonsense settings are rejected before anything is planned.
mock_provider "google" {}
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
}

run "sane_settings_plan" {
  command = plan
}

run "zero_shards" {
  command = plan
  variables {
    shards_per_page = 0
  }
  expect_failures = [var.shards_per_page]
}

run "fractional_shards" {
  command = plan
  variables {
    shards_per_page = 2.5
  }
  expect_failures = [var.shards_per_page]
}

run "negative_cache_ttl" {
  command = plan
  variables {
    cache_ttl_seconds = -1
  }
  expect_failures = [var.cache_ttl_seconds]
}

run "zero_marker_ttl" {
  command = plan
  variables {
    marker_ttl_days = 0
  }
  expect_failures = [var.marker_ttl_days]
}

run "bad_project_id" {
  command = plan
  variables {
    project_id = "Not A Project"
  }
  expect_failures = [var.project_id]
}

run "missing_function" {
  command = plan
  variables {
    functions = {
      "serve-page"  = { max_instances = 2, concurrency = 1 }
      "get-counter" = { max_instances = 2, concurrency = 1 }
      "inc-counter" = { max_instances = 2, concurrency = 1 }
    }
  }
  expect_failures = [var.functions]
}

run "unknown_function" {
  command = plan
  variables {
    functions = {
      "serve-page"        = { max_instances = 2, concurrency = 1 }
      "get-counter"       = { max_instances = 2, concurrency = 1 }
      "inc-counter"       = { max_instances = 2, concurrency = 1 }
      "store-inc-counter" = { max_instances = 2, concurrency = 1 }
      "store-inc-countr"  = { max_instances = 2, concurrency = 1 }
    }
  }
  expect_failures = [var.functions]
}

run "zero_max_instances" {
  command = plan
  variables {
    functions = {
      "serve-page"        = { max_instances = 2, concurrency = 1 }
      "get-counter"       = { max_instances = 2, concurrency = 1 }
      "inc-counter"       = { max_instances = 0, concurrency = 1 }
      "store-inc-counter" = { max_instances = 2, concurrency = 1 }
    }
  }
  expect_failures = [var.functions]
}

run "zero_concurrency" {
  command = plan
  variables {
    functions = {
      "serve-page"        = { max_instances = 2, concurrency = 0 }
      "get-counter"       = { max_instances = 2, concurrency = 1 }
      "inc-counter"       = { max_instances = 2, concurrency = 1 }
      "store-inc-counter" = { max_instances = 2, concurrency = 1 }
    }
  }
  expect_failures = [var.functions]
}

run "concurrency_needs_a_whole_vcpu" {
  command = plan
  variables {
    functions = {
      "serve-page"        = { max_instances = 2, concurrency = 1 }
      "get-counter"       = { max_instances = 2, concurrency = 10, cpu = "0.583" }
      "inc-counter"       = { max_instances = 2, concurrency = 1 }
      "store-inc-counter" = { max_instances = 2, concurrency = 1 }
    }
  }
  expect_failures = [var.functions]
}

run "timeout_out_of_range" {
  command = plan
  variables {
    functions = {
      "serve-page"        = { max_instances = 2, concurrency = 1 }
      "get-counter"       = { max_instances = 2, concurrency = 1 }
      "inc-counter"       = { max_instances = 2, concurrency = 1 }
      "store-inc-counter" = { max_instances = 2, concurrency = 1, timeout_seconds = 0 }
    }
  }
  expect_failures = [var.functions]
}

run "memory_without_unit" {
  command = plan
  variables {
    functions = {
      "serve-page"        = { max_instances = 2, concurrency = 1, memory = "256" }
      "get-counter"       = { max_instances = 2, concurrency = 1 }
      "inc-counter"       = { max_instances = 2, concurrency = 1 }
      "store-inc-counter" = { max_instances = 2, concurrency = 1 }
    }
  }
  expect_failures = [var.functions]
}

run "cpu_not_a_number" {
  command = plan
  variables {
    functions = {
      "serve-page"        = { max_instances = 2, concurrency = 1, cpu = "lots" }
      "get-counter"       = { max_instances = 2, concurrency = 1 }
      "inc-counter"       = { max_instances = 2, concurrency = 1 }
      "store-inc-counter" = { max_instances = 2, concurrency = 1 }
    }
  }
  expect_failures = [var.functions]
}

run "bad_region" {
  command = plan
  variables {
    region = "South America East"
  }
  expect_failures = [var.region]
}

run "topic_name_starting_with_goog" {
  command = plan
  variables {
    topic_name = "google-visits"
  }
  expect_failures = [var.topic_name]
}

run "topic_name_too_short" {
  command = plan
  variables {
    topic_name = "vi"
  }
  expect_failures = [var.topic_name]
}

run "max_instances_above_1000" {
  command = plan
  variables {
    functions = {
      "serve-page"        = { max_instances = 1001, concurrency = 1 }
      "get-counter"       = { max_instances = 2, concurrency = 1 }
      "inc-counter"       = { max_instances = 2, concurrency = 1 }
      "store-inc-counter" = { max_instances = 2, concurrency = 1 }
    }
  }
  expect_failures = [var.functions]
}

run "concurrency_above_1000" {
  command = plan
  variables {
    functions = {
      "serve-page"        = { max_instances = 2, concurrency = 1 }
      "get-counter"       = { max_instances = 2, concurrency = 1001 }
      "inc-counter"       = { max_instances = 2, concurrency = 1 }
      "store-inc-counter" = { max_instances = 2, concurrency = 1 }
    }
  }
  expect_failures = [var.functions]
}

run "timeout_above_3600" {
  command = plan
  variables {
    functions = {
      "serve-page"        = { max_instances = 2, concurrency = 1 }
      "get-counter"       = { max_instances = 2, concurrency = 1 }
      "inc-counter"       = { max_instances = 2, concurrency = 1, timeout_seconds = 3601 }
      "store-inc-counter" = { max_instances = 2, concurrency = 1 }
    }
  }
  expect_failures = [var.functions]
}

run "cpu_above_8" {
  command = plan
  variables {
    functions = {
      "serve-page"        = { max_instances = 2, concurrency = 1 }
      "get-counter"       = { max_instances = 2, concurrency = 1 }
      "inc-counter"       = { max_instances = 2, concurrency = 1 }
      "store-inc-counter" = { max_instances = 2, concurrency = 1, cpu = "16", memory = "512Mi" }
    }
  }
  expect_failures = [var.functions]
}

# Cloud Run's CPU/memory rules. Each failing case below breaks exactly one rule.
# Sizes on the edges that Cloud Run accepts: 512 MiB with the default 0.167 vCPU,
# 1 GiB (and 1 G, which is less) with 0.5 vCPU, 2 GiB with the 1 vCPU that
# concurrency above 1 implies, 4 GiB with 2 vCPUs.
run "cloud_run_sizes_on_the_edges_plan" {
  command = plan
  variables {
    functions = {
      "serve-page"        = { max_instances = 2, concurrency = 1, memory = "512Mi" }
      "get-counter"       = { max_instances = 2, concurrency = 1, memory = "1Gi", cpu = "0.5" }
      "inc-counter"       = { max_instances = 2, concurrency = 4, memory = "2Gi" }
      "store-inc-counter" = { max_instances = 2, concurrency = 1, memory = "4Gi", cpu = "2" }
    }
  }
}

run "cloud_run_sizes_in_decimal_units_plan" {
  command = plan
  variables {
    functions = {
      "serve-page"        = { max_instances = 2, concurrency = 1, memory = "536M" }
      "get-counter"       = { max_instances = 2, concurrency = 1, memory = "1G", cpu = "0.5" }
      "inc-counter"       = { max_instances = 2, concurrency = 1, memory = "1073M", cpu = "0.5" }
      "store-inc-counter" = { max_instances = 2, concurrency = 1, cpu = "1" }
    }
  }
}

run "memory_above_512_mib_needs_half_a_vcpu" {
  command = plan
  variables {
    functions = {
      "serve-page"        = { max_instances = 2, concurrency = 1 }
      "get-counter"       = { max_instances = 2, concurrency = 1, memory = "768Mi" }
      "inc-counter"       = { max_instances = 2, concurrency = 1 }
      "store-inc-counter" = { max_instances = 2, concurrency = 1 }
    }
  }
  expect_failures = [var.functions]
}

run "memory_above_512_mib_in_megabytes_needs_half_a_vcpu" {
  command = plan
  variables {
    functions = {
      "serve-page"        = { max_instances = 2, concurrency = 1 }
      "get-counter"       = { max_instances = 2, concurrency = 1 }
      "inc-counter"       = { max_instances = 2, concurrency = 1, memory = "537M", cpu = "0.333" }
      "store-inc-counter" = { max_instances = 2, concurrency = 1 }
    }
  }
  expect_failures = [var.functions]
}

run "memory_above_1_gib_needs_a_vcpu" {
  command = plan
  variables {
    functions = {
      "serve-page"        = { max_instances = 2, concurrency = 1 }
      "get-counter"       = { max_instances = 2, concurrency = 1 }
      "inc-counter"       = { max_instances = 2, concurrency = 1 }
      "store-inc-counter" = { max_instances = 2, concurrency = 1, memory = "2G", cpu = "0.5" }
    }
  }
  expect_failures = [var.functions]
}

run "cpu_above_1_must_be_whole" {
  command = plan
  variables {
    functions = {
      "serve-page"        = { max_instances = 2, concurrency = 1, cpu = "1.5" }
      "get-counter"       = { max_instances = 2, concurrency = 1 }
      "inc-counter"       = { max_instances = 2, concurrency = 1 }
      "store-inc-counter" = { max_instances = 2, concurrency = 1 }
    }
  }
  expect_failures = [var.functions]
}

# store-inc-counter's push subscription settings.
run "subscription_settings_on_the_edges_plan" {
  command = plan
  variables {
    subscription = {
      ack_deadline_seconds      = 600
      minimum_backoff_seconds   = 0
      maximum_backoff_seconds   = 0
      max_delivery_attempts     = 100
      message_retention_seconds = 604800
    }
  }
}

run "ack_deadline_below_10" {
  command = plan
  variables {
    subscription = { ack_deadline_seconds = 9 }
  }
  expect_failures = [var.subscription]
}

run "ack_deadline_above_600" {
  command = plan
  variables {
    subscription = { ack_deadline_seconds = 601 }
  }
  expect_failures = [var.subscription]
}

run "ack_deadline_fractional" {
  command = plan
  variables {
    subscription = { ack_deadline_seconds = 30.5 }
  }
  expect_failures = [var.subscription]
}

run "minimum_backoff_above_maximum" {
  command = plan
  variables {
    subscription = { minimum_backoff_seconds = 60, maximum_backoff_seconds = 30 }
  }
  expect_failures = [var.subscription]
}

run "maximum_backoff_above_600" {
  command = plan
  variables {
    subscription = { maximum_backoff_seconds = 601 }
  }
  expect_failures = [var.subscription]
}

run "negative_minimum_backoff" {
  command = plan
  variables {
    subscription = { minimum_backoff_seconds = -1 }
  }
  expect_failures = [var.subscription]
}

run "max_delivery_attempts_below_5" {
  command = plan
  variables {
    subscription = { max_delivery_attempts = 4 }
  }
  expect_failures = [var.subscription]
}

run "max_delivery_attempts_above_100" {
  command = plan
  variables {
    subscription = { max_delivery_attempts = 101 }
  }
  expect_failures = [var.subscription]
}

run "message_retention_below_10_minutes" {
  command = plan
  variables {
    subscription = { message_retention_seconds = 599 }
  }
  expect_failures = [var.subscription]
}

run "message_retention_above_7_days" {
  command = plan
  variables {
    subscription = { message_retention_seconds = 604801 }
  }
  expect_failures = [var.subscription]
}

run "unknown_access" {
  command = plan
  variables {
    access = "private"
  }
  expect_failures = [var.access]
}

run "access_in_upper_case" {
  command = plan
  variables {
    access = "Public"
  }
  expect_failures = [var.access]
}

# "auto" is the kit's to resolve (it passes -var=access=public or authenticated itself); a plain
# `terraform plan` or `destroy` with a settings file that says "auto" plans exactly as "public".
run "auto_access_plans_like_public" {
  command = plan
  variables {
    access               = "auto"
    invokers             = ["user:tester@example.com"]
    load_generator_users = ["user:tester@example.com"]
  }

  assert {
    condition     = { for k, m in google_cloud_run_v2_service_iam_member.invoker : k => m.member } == { "serve-page allUsers" = "allUsers", "get-counter allUsers" = "allUsers", "inc-counter allUsers" = "allUsers" }
    error_message = "access = auto grants run.invoker to allUsers on the three HTTP functions, as public does, and to no listed invoker."
  }
  assert {
    condition     = length(google_service_account.load_generator) == 0 && length(google_service_account_iam_member.load_generator_users) == 0
    error_message = "access = auto, like public, creates no load-generator account."
  }
  assert {
    condition     = { for k, f in google_cloudfunctions2_function.this : k => f.service_config[0].ingress_settings } == { "serve-page" = "ALLOW_ALL", "get-counter" = "ALLOW_ALL", "inc-counter" = "ALLOW_ALL", "store-inc-counter" = "ALLOW_INTERNAL_ONLY" }
    error_message = "access = auto leaves the ingress as public does."
  }
}

run "public_access_plans_the_same" {
  command = plan
  variables {
    access               = "public"
    invokers             = ["user:tester@example.com"]
    load_generator_users = ["user:tester@example.com"]
  }

  assert {
    condition     = { for k, m in google_cloud_run_v2_service_iam_member.invoker : k => m.member } == { "serve-page allUsers" = "allUsers", "get-counter allUsers" = "allUsers", "inc-counter allUsers" = "allUsers" } && length(google_service_account.load_generator) == 0
    error_message = "access = public grants run.invoker to allUsers only (the reference the auto run above is held to)."
  }
}

run "every_use_of_access_goes_through_local_access" {
  command = plan

  assert {
    condition     = length(google_cloud_run_v2_service_iam_member.invoker) == 3 && length(regexall("var\\.access\\b", join("\n", [for f in fileset(".", "*.tf") : file(f) if f != "variables.tf"]))) == 2 && length(regexall("\\baccess\\s*=\\s*var\\.access\\s*==\\s*\"auto\"\\s*\\?\\s*\"public\"\\s*:\\s*var\\.access\\b", file("main.tf"))) == 1
    error_message = "The module reads var.access in one place only (but for its validation in variables.tf), local.access in main.tf, which turns \"auto\" into \"public\"; everything else uses local.access."
  }
}

run "dead_letter_off_plans" {
  command = plan
  variables {
    dead_letter = false
  }
}

run "build_grants_wait_negative" {
  command = plan
  variables {
    build_grants_wait_seconds = -1
  }
  expect_failures = [var.build_grants_wait_seconds]
}

run "build_grants_wait_above_600" {
  command = plan
  variables {
    build_grants_wait_seconds = 601
  }
  expect_failures = [var.build_grants_wait_seconds]
}

run "build_grants_wait_fractional" {
  command = plan
  variables {
    build_grants_wait_seconds = 1.5
  }
  expect_failures = [var.build_grants_wait_seconds]
}

run "invoker_without_a_kind" {
  command = plan
  variables {
    access   = "authenticated"
    invokers = ["tester@example.com"]
  }
  expect_failures = [var.invokers]
}

run "min_instances_above_max" {
  command = plan
  variables {
    functions = {
      "serve-page"        = { max_instances = 2, concurrency = 1, min_instances = 3 }
      "get-counter"       = { max_instances = 2, concurrency = 1 }
      "inc-counter"       = { max_instances = 2, concurrency = 1 }
      "store-inc-counter" = { max_instances = 2, concurrency = 1 }
    }
  }
  expect_failures = [var.functions]
}

run "cors_origins_on_the_edges_plan" {
  command = plan
  variables {
    cors_allowed_origins = ["https://example.com", "https://a-b.example.co.uk:443", "https://localhost:8443"]
  }
}

run "cors_origin_over_http" {
  command = plan
  variables {
    cors_allowed_origins = ["http://www.example.com"]
  }
  expect_failures = [var.cors_allowed_origins]
}

run "cors_origin_wildcard" {
  command = plan
  variables {
    cors_allowed_origins = ["*"]
  }
  expect_failures = [var.cors_allowed_origins]
}

run "cors_origin_with_a_path" {
  command = plan
  variables {
    cors_allowed_origins = ["https://www.example.com/"]
  }
  expect_failures = [var.cors_allowed_origins]
}

run "cors_origin_in_upper_case" {
  command = plan
  variables {
    cors_allowed_origins = ["https://WWW.example.com"]
  }
  expect_failures = [var.cors_allowed_origins]
}

run "cors_origin_listed_twice" {
  command = plan
  variables {
    cors_allowed_origins = ["https://www.example.com", "https://www.example.com"]
  }
  expect_failures = [var.cors_allowed_origins]
}

run "page_idle_seconds_negative" {
  command = plan
  variables {
    page_idle_seconds = -1
  }
  expect_failures = [var.page_idle_seconds]
}

run "page_idle_seconds_above_a_day" {
  command = plan
  variables {
    page_idle_seconds = 86401
  }
  expect_failures = [var.page_idle_seconds]
}

run "page_idle_seconds_fractional" {
  command = plan
  variables {
    page_idle_seconds = 1.5
  }
  expect_failures = [var.page_idle_seconds]
}
