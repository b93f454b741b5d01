# How the fleet connects: network exposure, NAT, the run's files, the startup scripts and IAM.
# Plans against the mocked provider (nothing leaves the process); the last run applies to the
# mocks so that computed values such as the service account's member have values to follow.
mock_provider "google" {}
mock_provider "google" {
  alias = "billing"
}

variables {
  project_id           = "visitkit-test"
  region               = "southamerica-east1"
  workers              = 3
  processes_per_worker = 4
  master_port          = 6000
  nat_min_ports_per_vm = 4096
  run_dir              = "tests/run"
  invoked_services     = ["app", "get-counter", "inc-counter"]
  run_minutes          = 20
}

run "nothing_is_open_to_the_internet" {
  command = plan

  assert {
    condition     = alltrue([for f in [google_compute_firewall.workers_to_master, google_compute_firewall.iap_ssh] : f.direction == "INGRESS" && !contains(f.source_ranges == null ? [] : tolist(f.source_ranges), "0.0.0.0/0")])
    error_message = "No firewall rule may allow ingress from 0.0.0.0/0."
  }
  assert {
    condition     = length(google_compute_instance.master.network_interface[0].access_config) == 0
    error_message = "The master must have no external address (no access_config)."
  }
  assert {
    condition     = alltrue([for w in google_compute_instance.worker : length(w.network_interface[0].access_config) == 0])
    error_message = "The workers must have no external address (no access_config)."
  }
  assert {
    condition     = google_storage_bucket.run.public_access_prevention == "enforced" && google_storage_bucket.run.uniform_bucket_level_access
    error_message = "The bucket must enforce public access prevention and uniform bucket-level access."
  }
}

run "workers_reach_the_master_on_its_port_only" {
  command = plan

  assert {
    condition     = google_compute_firewall.workers_to_master.source_ranges == null && google_compute_firewall.workers_to_master.source_tags == toset(["visitkit-locust-worker"]) && google_compute_firewall.workers_to_master.target_tags == toset(["visitkit-locust-master"])
    error_message = "The master-port rule must allow the worker tag alone, to the master tag alone."
  }
  assert {
    condition     = [for a in google_compute_firewall.workers_to_master.allow : "${a.protocol}:${join(",", a.ports)}"] == ["tcp:6000"]
    error_message = "The master-port rule must allow tcp on master_port and nothing else."
  }
  assert {
    condition     = google_compute_instance.master.tags == toset(["visitkit-locust-master"]) && alltrue([for w in google_compute_instance.worker : w.tags == toset(["visitkit-locust-worker"])])
    error_message = "The master and the workers must carry the tags the rules name."
  }
}

run "ssh_only_through_iap" {
  command = plan

  assert {
    condition     = google_compute_firewall.iap_ssh.source_ranges == toset(["35.235.240.0/20"]) && google_compute_firewall.iap_ssh.source_tags == null
    error_message = "SSH must be allowed from IAP's TCP forwarding range 35.235.240.0/20 only."
  }
  assert {
    condition     = [for a in google_compute_firewall.iap_ssh.allow : "${a.protocol}:${join(",", a.ports)}"] == ["tcp:22"]
    error_message = "The IAP rule must allow tcp:22 and nothing else."
  }
  assert {
    condition     = google_compute_firewall.iap_ssh.target_tags == toset(["visitkit-locust-master", "visitkit-locust-worker"])
    error_message = "The IAP rule must reach the master and the workers."
  }
  assert {
    condition     = alltrue([for m in concat([google_compute_instance.master.metadata], [for w in google_compute_instance.worker : w.metadata]) : m["enable-oslogin"] == "TRUE" && m["block-project-ssh-keys"] == "true"])
    error_message = "Both the master and the workers must use OS Login and block project-wide SSH keys."
  }
  assert {
    condition     = output.ssh_master == "gcloud compute ssh visitkit-locust-master --zone southamerica-east1-a --project visitkit-test --tunnel-through-iap"
    error_message = "ssh_master must be the IAP SSH command for the master in its zone."
  }
}

run "vms_are_hardened" {
  command = plan

  assert {
    condition = alltrue([for s in concat([google_compute_instance.master.shielded_instance_config[0]], [for w in google_compute_instance.worker : w.shielded_instance_config[0]]) :
    s.enable_secure_boot && s.enable_vtpm && s.enable_integrity_monitoring])
    error_message = "The master and the workers must be Shielded VMs (secure boot, vTPM, integrity monitoring)."
  }
  assert {
    condition     = alltrue([for i in concat([google_compute_instance.master], values(google_compute_instance.worker)) : i.boot_disk[0].initialize_params[0].image == "debian-cloud/debian-12"])
    error_message = "The master and the workers must boot Debian 12."
  }
}

run "nat_reserves_the_ports_asked_for" {
  command = plan

  assert {
    condition     = google_compute_router_nat.this.min_ports_per_vm == 4096 && google_compute_router_nat.this.enable_dynamic_port_allocation == false
    error_message = "Cloud NAT must reserve nat_min_ports_per_vm ports per VM, statically."
  }
  assert {
    condition     = google_compute_router_nat.this.nat_ip_allocate_option == "AUTO_ONLY" && google_compute_router_nat.this.source_subnetwork_ip_ranges_to_nat == "ALL_SUBNETWORKS_ALL_IP_RANGES"
    error_message = "Cloud NAT must serve every subnet with addresses it allocates itself."
  }
  assert {
    condition     = google_compute_router_nat.this.log_config[0].enable && google_compute_router_nat.this.log_config[0].filter == "ERRORS_ONLY"
    error_message = "Cloud NAT must log errors (port exhaustion) only."
  }
  assert {
    condition     = google_compute_subnetwork.this.private_ip_google_access && google_compute_network.this.auto_create_subnetworks == false
    error_message = "The fleet's own network must have one subnet with Private Google Access."
  }
}

run "every_staged_file_is_uploaded_under_run" {
  command = plan

  assert {
    condition     = toset(keys(google_storage_bucket_object.run)) == toset(["locust/node.py", "run.conf"])
    error_message = "There must be one bucket object per file of run_dir."
  }
  assert {
    condition     = alltrue([for k, o in google_storage_bucket_object.run : o.name == "run/${k}" && o.source == "tests/run/${k}" && o.source_md5hash == filemd5("tests/run/${k}")])
    error_message = "Each file must be uploaded as run/PATH from run_dir, with its MD5 so that a changed file uploads again."
  }
  assert {
    condition     = google_storage_bucket.run.name == "visitkit-test-visitkit-loadgen" && google_storage_bucket.run.force_destroy
    error_message = "The bucket must be PROJECT-visitkit-loadgen, destroyable with its objects."
  }
}

run "startup_scripts_connect_master_and_workers" {
  command = plan

  assert {
    condition     = output.expect_workers == 12
    error_message = "expect_workers must be workers x processes_per_worker."
  }
  assert {
    condition     = google_compute_address.master.address_type == "INTERNAL" && google_compute_instance.master.network_interface[0].network_ip == google_compute_address.master.address
    error_message = "The master must use its reserved internal address."
  }
  assert {
    condition     = alltrue([for w in google_compute_instance.worker : strcontains(w.metadata["startup-script"], "locust/node.py worker --config run.conf --master-host ${output.master_internal_ip} --master-port 6000 --processes 4 --master-wait 900")])
    error_message = "The workers' startup script must name the master's internal address, master_port and processes_per_worker, and wait boot_minutes for the master."
  }
  assert {
    condition     = strcontains(google_compute_instance.master.metadata["startup-script"], "locust/node.py master --config run.conf --out /opt/visitkit/out --bind-port 6000 --expect-workers 12")
    error_message = "The master's startup script must bind master_port and wait for workers x processes_per_worker processes."
  }
  assert {
    condition     = alltrue([for s in concat([google_compute_instance.master.metadata["startup-script"]], [for w in google_compute_instance.worker : w.metadata["startup-script"]]) : strcontains(s, "gs://$bucket/run") && strcontains(s, "bucket=\"visitkit-test-visitkit-loadgen\"")])
    error_message = "Both startup scripts must fetch run/ from the fleet's bucket."
  }
  assert {
    condition     = alltrue([for w in google_compute_instance.worker : !strcontains(w.metadata["startup-script"], "node.py master")]) && !strcontains(google_compute_instance.master.metadata["startup-script"], "node.py worker")
    error_message = "Each VM must run its own role only."
  }
  assert {
    condition     = output.worker_names == tolist(["visitkit-locust-worker-01", "visitkit-locust-worker-02", "visitkit-locust-worker-03"]) && alltrue([for w in google_compute_instance.worker : w.zone == output.zone]) && output.zone == "southamerica-east1-a"
    error_message = "There must be workers worker VMs, in the master's zone (REGION-a by default)."
  }
}

run "no_invoker_binding_for_a_public_deployment" {
  command = plan
  variables {
    invoked_services = []
  }

  assert {
    condition     = length(google_cloud_run_v2_service_iam_member.fleet) == 0
    error_message = "Without invoked_services the fleet must invoke nothing."
  }
}

run "least_privilege" {
  command = apply

  assert {
    condition     = toset(keys(google_cloud_run_v2_service_iam_member.fleet)) == toset(["app", "get-counter", "inc-counter"])
    error_message = "There must be one invoker binding per invoked_services entry, and no other."
  }
  assert {
    condition = alltrue([for k, b in google_cloud_run_v2_service_iam_member.fleet :
    b.name == k && b.location == "southamerica-east1" && b.role == "roles/run.invoker" && b.member == google_service_account.fleet.member])
    error_message = "Each binding must make the fleet's account an invoker of that service in region."
  }
  assert {
    condition     = toset([for m in google_project_iam_member.fleet : m.role]) == toset(["roles/logging.logWriter", "roles/monitoring.metricWriter"]) && alltrue([for m in google_project_iam_member.fleet : m.member == google_service_account.fleet.member])
    error_message = "The fleet's only project-wide roles must be logging.logWriter and monitoring.metricWriter."
  }
  assert {
    condition     = google_storage_bucket_iam_member.fleet.bucket == google_storage_bucket.run.name && google_storage_bucket_iam_member.fleet.role == "roles/storage.objectAdmin" && google_storage_bucket_iam_member.fleet.member == google_service_account.fleet.member
    error_message = "The fleet's storage role must be objectAdmin on its own bucket only."
  }
  assert {
    condition     = alltrue([for i in concat([google_compute_instance.master], values(google_compute_instance.worker)) : i.service_account[0].email == google_service_account.fleet.email])
    error_message = "The master and the workers must run as the fleet's account."
  }
  assert {
    condition     = output.service_account_email == google_service_account.fleet.email && output.bucket == google_storage_bucket.run.name
    error_message = "The outputs must name the fleet's account and bucket."
  }
}
