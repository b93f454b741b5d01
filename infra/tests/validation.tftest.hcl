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
