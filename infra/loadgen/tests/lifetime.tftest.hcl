# How long the fleet lives and what it runs: every VM is bounded in time even if the kit and the
# master both die, the workers end themselves when their part is over, the master uploads its files
# every minute, the VMs install the hashed lock, and the budget alert is there only when asked for.
mock_provider "google" {}
mock_provider "google" {
  alias = "billing"
}

variables {
  project_id  = "visitkit-test"
  workers     = 3
  run_dir     = "tests/run"
  run_minutes = 20
}

run "every_vm_is_deleted_after_the_planned_length_and_its_margins" {
  command = plan

  assert {
    condition     = length(google_compute_instance.worker) == 3
    error_message = "Each worker must be a standalone VM (a managed group would recreate a VM that ends)."
  }
  assert {
    condition = alltrue([for i in concat([google_compute_instance.master], values(google_compute_instance.worker)) :
    i.scheduling[0].instance_termination_action == "DELETE" && i.scheduling[0].provisioning_model == "STANDARD"])
    error_message = "Every VM, master and workers, must be a standard VM deleted (not stopped) when its time is up."
  }
  assert {
    condition = alltrue([for i in concat([google_compute_instance.master], values(google_compute_instance.worker)) :
    i.scheduling[0].max_run_duration[0].seconds == (15 + 20 + 10) * 60])
    error_message = "Every VM's maximum run duration must be boot_minutes + run_minutes + 10 minutes."
  }
  assert {
    condition = alltrue([for i in concat([google_compute_instance.master], values(google_compute_instance.worker)) :
    i.scheduling[0].max_run_duration[0].seconds >= (var.boot_minutes + var.run_minutes) * 60])
    error_message = "No VM may be deleted before the planned length and the boot allowance have passed."
  }
  assert {
    condition     = output.max_run_seconds == 2700
    error_message = "max_run_seconds must report the VMs' bound."
  }
}

run "the_bound_follows_the_planned_length" {
  command = plan
  variables {
    run_minutes  = 90
    boot_minutes = 20
  }

  assert {
    condition = alltrue([for i in concat([google_compute_instance.master], values(google_compute_instance.worker)) :
    i.scheduling[0].max_run_duration[0].seconds == (20 + 90 + 10) * 60])
    error_message = "A longer run and boot must lengthen every VM's maximum run duration."
  }
  assert {
    condition     = alltrue([for w in google_compute_instance.worker : strcontains(w.metadata["startup-script"], "--master-wait 1200")])
    error_message = "A worker must wait boot_minutes for its master, then end."
  }
}

run "a_worker_ends_its_own_vm_and_never_restarts_its_node" {
  command = plan

  assert {
    condition = alltrue([for name, w in google_compute_instance.worker :
    strcontains(w.metadata["startup-script"], "https://compute.googleapis.com/compute/v1/projects/visitkit-test/zones/southamerica-east1-a/instances/${name}\"")])
    error_message = "Each worker's script must delete its own VM, by its name, project and zone."
  }
  assert {
    condition = alltrue([for w in google_compute_instance.worker :
    strcontains(w.metadata["startup-script"], "trap finish EXIT") && strcontains(w.metadata["startup-script"], "end_this_vm\n  exit")])
    error_message = "However a worker's script ends, it must upload its log and end its VM."
  }
  assert {
    condition     = alltrue([for w in google_compute_instance.worker : !strcontains(w.metadata["startup-script"], "while")])
    error_message = "A worker's script must start its node once: no loop that restarts it."
  }
  assert {
    condition     = !strcontains(google_compute_instance.master.metadata["startup-script"], "-X DELETE")
    error_message = "The master must not delete itself: it is bounded by its maximum run duration and the kit's destroy."
  }
}

run "the_master_uploads_its_files_every_minute" {
  command = plan

  assert {
    condition     = strcontains(google_compute_instance.master.metadata["startup-script"], "sleep 60 &") && strcontains(google_compute_instance.master.metadata["startup-script"], "gcloud storage rsync --recursive /opt/visitkit/out \"gs://$bucket/results\"")
    error_message = "The master must copy its output folder to results/ every minute."
  }
  assert {
    condition     = strcontains(google_compute_instance.master.metadata["startup-script"], "sync_results &\nsync_pid=$!\ncode=0\n/opt/visitkit/venv/bin/python locust/node.py master")
    error_message = "The minute's copies must start right before the master's node."
  }
  assert {
    condition     = strcontains(google_compute_instance.master.metadata["startup-script"], "kill \"$sync_pid\"") && strcontains(google_compute_instance.master.metadata["startup-script"], "wait \"$sync_pid\"")
    error_message = "The master's finish must stop the minute's copies (waiting for one under way) before its last upload."
  }
  assert {
    condition     = alltrue([for w in google_compute_instance.worker : !strcontains(w.metadata["startup-script"], "rsync")])
    error_message = "Only the master uploads results."
  }
}

run "the_vms_install_the_hashed_lock" {
  command = plan

  assert {
    condition     = google_storage_bucket_object.lock.name == "run/requirements.txt" && google_storage_bucket_object.lock.source == "./requirements.txt" && google_storage_bucket_object.lock.source_md5hash == filemd5("requirements.txt")
    error_message = "The module's lock, requirements.txt, must be uploaded as run/requirements.txt (again when it changes)."
  }
  assert {
    condition = alltrue([for s in concat([google_compute_instance.master.metadata["startup-script"]], [for w in google_compute_instance.worker : w.metadata["startup-script"]]) :
    strcontains(s, "pip install --quiet --disable-pip-version-check --require-hashes --only-binary :all: -r /opt/visitkit/run/requirements.txt")])
    error_message = "Every VM must install the lock with hash checking, from wheels only."
  }
  assert {
    condition     = length(regexall("(?m)^locust==2\\.47\\.0 \\\\$", file(google_storage_bucket_object.lock.source))) == 1 && length(regexall("--hash=sha256:[0-9a-f]{64}", file(google_storage_bucket_object.lock.source))) > 40
    error_message = "The lock must pin the kit's Locust, with hashes."
  }
}

run "no_budget_unless_a_billing_account_is_given" {
  command = plan

  assert {
    condition     = length(google_billing_budget.fleet) == 0 && length(google_project_service.budgets) == 0 && length(data.google_project.this) == 0
    error_message = "Without billing_account there must be no budget and nothing for it."
  }
}

run "a_budget_on_the_project_when_asked_for" {
  command = plan
  variables {
    billing_account = "012345-6789AB-CDEF01"
    budget_amount   = 80
  }
  override_data {
    target = data.google_project.this[0]
    values = {
      number = "123456789012"
    }
  }

  assert {
    condition     = google_billing_budget.fleet[0].billing_account == "012345-6789AB-CDEF01" && google_billing_budget.fleet[0].budget_filter[0].projects == toset(["projects/123456789012"])
    error_message = "The budget must be on the billing account given, for the fleet's project alone."
  }
  assert {
    condition     = google_billing_budget.fleet[0].amount[0].specified_amount[0].units == "80" && [for r in google_billing_budget.fleet[0].threshold_rules : r.threshold_percent] == [0.5, 0.9, 1.0]
    error_message = "The budget must be budget_amount a month, alerting at 50, 90 and 100 %."
  }
  assert {
    condition     = google_project_service.budgets[0].service == "billingbudgets.googleapis.com" && !google_project_service.budgets[0].disable_on_destroy
    error_message = "The budget API must be enabled, and left on at destroy."
  }
}

run "each_worker_may_delete_the_fleets_workers_only" {
  command = apply

  assert {
    condition     = google_project_iam_custom_role.end_worker.permissions == toset(["compute.instances.delete"])
    error_message = "The workers' role must hold compute.instances.delete and nothing else."
  }
  assert {
    condition     = toset(keys(google_compute_instance_iam_member.end_worker)) == toset(keys(google_compute_instance.worker))
    error_message = "There must be one grant per worker VM, and none on any other VM."
  }
  assert {
    condition = alltrue([for k, b in google_compute_instance_iam_member.end_worker :
    b.instance_name == google_compute_instance.worker[k].name && b.zone == google_compute_instance.worker[k].zone && b.role == google_project_iam_custom_role.end_worker.name && b.member == google_service_account.fleet.member])
    error_message = "Each grant must give the fleet's account the workers' role on that worker VM alone."
  }
  assert {
    condition     = alltrue([for m in google_project_iam_member.fleet : !strcontains(m.role, "compute")])
    error_message = "The fleet's account must have no Compute role on the project."
  }
}
