# Nonsense settings are rejected before anything is planned.
mock_provider "google" {}
mock_provider "google" {
  alias = "billing"
}

variables {
  project_id  = "visitkit-test"
  workers     = 2
  run_dir     = "tests/run"
  run_minutes = 30
}

run "sane_settings_plan" {
  command = plan
}

run "zero_workers" {
  command = plan
  variables {
    workers = 0
  }
  expect_failures = [var.workers]
}

run "too_many_workers" {
  command = plan
  variables {
    workers = 101
  }
  expect_failures = [var.workers]
}

run "fractional_workers" {
  command = plan
  variables {
    workers = 2.5
  }
  expect_failures = [var.workers]
}

run "bad_worker_machine_type" {
  command = plan
  variables {
    worker_machine_type = "E2 Standard 4"
  }
  expect_failures = [var.worker_machine_type]
}

run "bad_master_machine_type" {
  command = plan
  variables {
    master_machine_type = "e2"
  }
  expect_failures = [var.master_machine_type]
}

run "zero_processes" {
  command = plan
  variables {
    processes_per_worker = 0
  }
  expect_failures = [var.processes_per_worker]
}

run "too_many_processes" {
  command = plan
  variables {
    processes_per_worker = 65
  }
  expect_failures = [var.processes_per_worker]
}

run "privileged_master_port" {
  command = plan
  variables {
    master_port = 80
  }
  expect_failures = [var.master_port]
}

run "master_port_out_of_range" {
  command = plan
  variables {
    master_port = 65536
  }
  expect_failures = [var.master_port]
}

run "nat_ports_below_cloud_nat_default" {
  command = plan
  variables {
    nat_min_ports_per_vm = 32
  }
  expect_failures = [var.nat_min_ports_per_vm]
}

run "nat_ports_above_65536" {
  command = plan
  variables {
    nat_min_ports_per_vm = 65537
  }
  expect_failures = [var.nat_min_ports_per_vm]
}

run "fractional_nat_ports" {
  command = plan
  variables {
    nat_min_ports_per_vm = 100.5
  }
  expect_failures = [var.nat_min_ports_per_vm]
}

# Static port allocation rounds up to a power of two by itself: 5000 is accepted.
run "nat_ports_need_not_be_a_power_of_two" {
  command = plan
  variables {
    nat_min_ports_per_vm = 5000
  }
  assert {
    condition     = google_compute_router_nat.this.min_ports_per_vm == 5000
    error_message = "A whole number of NAT ports that is not a power of two must be accepted (static allocation)."
  }
}

run "run_dir_without_the_suite" {
  command = plan
  variables {
    run_dir = "tests"
  }
  expect_failures = [var.run_dir]
}

# The VMs install the module's lock: a staged requirements.txt beside it would be a second list.
run "run_dir_with_its_own_requirements" {
  command = plan
  variables {
    run_dir = "tests/run-with-requirements"
  }
  expect_failures = [var.run_dir]
}

run "missing_run_dir" {
  command = plan
  variables {
    run_dir = "tests/no-such-folder"
  }
  expect_failures = [var.run_dir]
}

run "bad_invoked_service" {
  command = plan
  variables {
    invoked_services = ["get-counter", "Get_Counter"]
  }
  expect_failures = [var.invoked_services]
}

run "bad_zone" {
  command = plan
  variables {
    zone = "southamerica-east1"
  }
  expect_failures = [var.zone]
}

run "zone_outside_region" {
  command = plan
  variables {
    zone = "us-central1-a"
  }
  expect_failures = [google_compute_instance.master]
}

run "bad_project_id" {
  command = plan
  variables {
    project_id = "Not A Project"
  }
  expect_failures = [var.project_id]
}

# The planned length bounds every VM's life: a missing, zero, fractional or absurd one is refused.
run "missing_run_minutes" {
  command = plan
  variables {
    run_minutes = null
  }
  expect_failures = [var.run_minutes]
}

run "zero_run_minutes" {
  command = plan
  variables {
    run_minutes = 0
  }
  expect_failures = [var.run_minutes]
}

run "fractional_run_minutes" {
  command = plan
  variables {
    run_minutes = 12.5
  }
  expect_failures = [var.run_minutes]
}

run "run_minutes_over_a_day" {
  command = plan
  variables {
    run_minutes = 1441
  }
  expect_failures = [var.run_minutes]
}

run "a_day_long_run_is_accepted" {
  command = plan
  variables {
    run_minutes = 1440
  }
  assert {
    condition     = output.max_run_seconds == (15 + 1440 + 10) * 60
    error_message = "A run of 1440 minutes (the kit's longest) must plan."
  }
}

run "boot_minutes_too_short" {
  command = plan
  variables {
    boot_minutes = 4
  }
  expect_failures = [var.boot_minutes]
}

run "boot_minutes_too_long" {
  command = plan
  variables {
    boot_minutes = 61
  }
  expect_failures = [var.boot_minutes]
}

run "bad_billing_account" {
  command = plan
  variables {
    billing_account = "my-billing-account"
  }
  expect_failures = [var.billing_account]
}

run "zero_budget" {
  command = plan
  variables {
    billing_account = "012345-6789AB-CDEF01"
    budget_amount   = 0
  }
  expect_failures = [var.budget_amount]
}
