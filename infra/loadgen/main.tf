locals {
  zone = coalesce(var.zone, "${var.region}-a")

  # One subnet of the fleet's own network: room for the master and 100 workers.
  subnet_cidr = "10.10.0.0/24"
  # The master's fixed internal address (.0, .1 and the last two are Google's), known when
  # planning, so the workers' startup scripts can name it before the master exists.
  master_ip = cidrhost(local.subnet_cidr, 2)

  master_name = "visitkit-locust-master"
  master_tag  = "visitkit-locust-master"
  worker_tag  = "visitkit-locust-worker"

  # The only source of SSH: Identity-Aware Proxy's TCP forwarding range (Google's IAP documentation).
  iap_range = "35.235.240.0/20"

  # The Locust worker processes the master waits for before it starts the test.
  expect_workers = var.workers * var.processes_per_worker

  # What the kit staged, less Python's caches.
  run_files = toset([for f in fileset(var.run_dir, "**") : f if length(regexall("(^|/)__pycache__/|\\.pyc$", f)) == 0])

  # Debian 12 images have the gcloud CLI and Python 3.11 (the startup script adds python3-venv);
  # requirements.txt, the fleet's lock, is built for that Python and platform (requirements.in).
  image = "debian-cloud/debian-12"

  # One standalone VM per worker, not a managed instance group: a group recreates a VM that is
  # deleted or stops, so neither a VM's maximum run duration nor a worker ending itself would
  # bound it.
  worker_names = toset([for i in range(var.workers) : format("visitkit-locust-worker-%02d", i + 1)])

  # Every VM is deleted by Compute Engine at the latest this long after it starts, whatever
  # happens to the kit and the master: boot_minutes to boot, install and connect, the test's
  # planned run_minutes, then end_minutes for the master's last upload and the kit's copy of it
  # (the kit waits 15 + planned + 2.5 minutes for the results: cloud/fleet.py).
  end_minutes     = 10
  max_run_seconds = (var.boot_minutes + var.run_minutes + local.end_minutes) * 60

  startup = {
    bucket         = google_storage_bucket.run.name
    project        = var.project_id
    zone           = local.zone
    master_host    = google_compute_address.master.address
    master_port    = var.master_port
    expect_workers = local.expect_workers
    processes      = var.processes_per_worker
    master_wait_s  = var.boot_minutes * 60
  }

  labels = { app = "visitkit", part = "loadgen" }

  # iam creates the service account; cloudresourcemanager serves the project's IAM policy (off in
  # some new projects), as in infra/.
  services = toset([
    "cloudresourcemanager.googleapis.com",
    "compute.googleapis.com",
    "iam.googleapis.com",
    "storage.googleapis.com",
  ])
}

resource "google_project_service" "this" {
  for_each = local.services

  project = var.project_id
  service = each.value
  # Other things in the project (infra/) use these APIs: destroy leaves them on.
  disable_on_destroy = false
}

# --- Identity ------------------------------------------------------------------

resource "google_service_account" "fleet" {
  project      = var.project_id
  account_id   = "visitkit-fleet"
  display_name = "Visit counter Locust load-generator fleet (master and workers)"

  depends_on = [google_project_service.this]
}

# The guest environment sends the startup scripts' output to Cloud Logging; metrics for the
# VMs' own monitoring. Neither role has a finer resource than the project.
resource "google_project_iam_member" "fleet" {
  for_each = toset(["roles/logging.logWriter", "roles/monitoring.metricWriter"])

  project = var.project_id
  role    = each.value
  member  = google_service_account.fleet.member

  depends_on = [google_project_service.this]
}

# Reads run/, writes results/ and logs/: on the fleet's bucket only.
resource "google_storage_bucket_iam_member" "fleet" {
  bucket = google_storage_bucket.run.name
  role   = "roles/storage.objectAdmin"
  member = google_service_account.fleet.member
}

# access = "authenticated": Locust sends ID tokens of the fleet's account (the VMs' metadata
# server mints them), so the account must be an invoker of each function it calls.
resource "google_cloud_run_v2_service_iam_member" "fleet" {
  for_each = toset(var.invoked_services)

  project  = var.project_id
  location = var.region
  name     = each.value
  role     = "roles/run.invoker"
  member   = google_service_account.fleet.member
}

# --- The run's files and results -----------------------------------------------

resource "google_storage_bucket" "run" {
  # checkov:skip=CKV_GCP_62: a scratch bucket of one load test, destroyed after it; access logs add cost, not insight.
  # checkov:skip=CKV_GCP_78: the kit uploads each run afresh and destroys the bucket after it; versioning would only keep garbage.
  project                     = var.project_id
  name                        = "${var.project_id}-visitkit-loadgen"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = true # the kit destroys the fleet, results included, after fetching them
  labels                      = local.labels

  # Anything left behind by a fleet that was never destroyed.
  lifecycle_rule {
    condition {
      age = 7
    }
    action {
      type = "Delete"
    }
  }

  # Deleted objects are scratch, not worth the default 7 days of soft-delete storage.
  soft_delete_policy {
    retention_duration_seconds = 0
  }

  depends_on = [google_project_service.this]
}

resource "google_storage_bucket_object" "run" {
  for_each = local.run_files

  bucket = google_storage_bucket.run.name
  name   = "run/${each.value}"
  source = "${var.run_dir}/${each.value}"
  # A changed file uploads again.
  source_md5hash = filemd5("${var.run_dir}/${each.value}")
}

# The fleet's lock: every package the VMs install, pinned with its hashes (requirements.in says how
# it is made). The startup script installs it with pip --require-hashes, so a VM runs exactly the
# versions the kit was benchmarked with, or fails to start.
resource "google_storage_bucket_object" "lock" {
  bucket         = google_storage_bucket.run.name
  name           = "run/requirements.txt"
  source         = "${path.module}/requirements.txt"
  source_md5hash = filemd5("${path.module}/requirements.txt")
}

# --- Network -------------------------------------------------------------------

resource "google_compute_network" "this" {
  project                 = var.project_id
  name                    = "visitkit-loadgen"
  auto_create_subnetworks = false

  depends_on = [google_project_service.this]
}

resource "google_compute_subnetwork" "this" {
  # checkov:skip=CKV_GCP_26: a network that lives for one load test; flow logs of its thousands of connections to one front end would cost more than they tell.
  # checkov:skip=CKV_GCP_76: an IPv4-only subnet; there is no IPv6 traffic to give private Google access.
  project                  = var.project_id
  name                     = "visitkit-loadgen"
  region                   = var.region
  network                  = google_compute_network.this.id
  ip_cidr_range            = local.subnet_cidr
  private_ip_google_access = true
}

# The VMs have no external address: Cloud NAT takes them to the internet (Debian and PyPI
# packages, the functions' front end).
resource "google_compute_router" "this" {
  project = var.project_id
  name    = "visitkit-loadgen"
  region  = var.region
  network = google_compute_network.this.id
}

resource "google_compute_router_nat" "this" {
  project                            = var.project_id
  name                               = "visitkit-loadgen"
  router                             = google_compute_router.this.name
  region                             = var.region
  nat_ip_allocate_option             = "AUTO_ONLY"
  source_subnetwork_ip_ranges_to_nat = "ALL_SUBNETWORKS_ALL_IP_RANGES"
  # Static allocation: each VM gets min_ports_per_vm ports up front, one per open connection to
  # the same destination IP and port. Cloud NAT rounds the number up to a power of two (only
  # dynamic allocation requires one, of at least 32); a NAT address has 64,512 ports.
  enable_dynamic_port_allocation = false
  min_ports_per_vm               = var.nat_min_ports_per_vm

  log_config {
    enable = true
    filter = "ERRORS_ONLY" # port exhaustion shows up here
  }
}

# Workers reach the master on master_port only.
resource "google_compute_firewall" "workers_to_master" {
  project     = var.project_id
  name        = "visitkit-locust-workers-to-master"
  network     = google_compute_network.this.id
  description = "Locust workers to their master, on the master's port only."
  direction   = "INGRESS"
  source_tags = [local.worker_tag]
  target_tags = [local.master_tag]

  allow {
    protocol = "tcp"
    ports    = [tostring(var.master_port)]
  }
}

# SSH only through Identity-Aware Proxy (gcloud compute ssh --tunnel-through-iap).
resource "google_compute_firewall" "iap_ssh" {
  project       = var.project_id
  name          = "visitkit-locust-iap-ssh"
  network       = google_compute_network.this.id
  description   = "SSH to the Locust VMs from Identity-Aware Proxy's TCP forwarding range only."
  direction     = "INGRESS"
  source_ranges = [local.iap_range]
  target_tags   = [local.master_tag, local.worker_tag]

  allow {
    protocol = "tcp"
    ports    = ["22"]
  }
}

resource "google_compute_address" "master" {
  project      = var.project_id
  name         = "visitkit-locust-master"
  region       = var.region
  address_type = "INTERNAL"
  subnetwork   = google_compute_subnetwork.this.id
  address      = local.master_ip
}

# --- Locust master and workers -------------------------------------------------

resource "google_compute_instance" "master" {
  # checkov:skip=CKV_GCP_38: the disk holds the public Locust suite and a load test's results for an hour; Google-managed encryption is enough.
  project      = var.project_id
  name         = local.master_name
  zone         = local.zone
  machine_type = var.master_machine_type
  tags         = [local.master_tag]
  labels       = merge(local.labels, { role = "locust-master" })

  boot_disk {
    initialize_params {
      image = local.image
    }
  }

  # No access_config: no external address.
  network_interface {
    subnetwork = google_compute_subnetwork.this.id
    network_ip = google_compute_address.master.address
  }

  shielded_instance_config {
    enable_secure_boot          = true
    enable_vtpm                 = true
    enable_integrity_monitoring = true
  }

  # No SSH key in metadata: OS Login decides who may log in (IAP SSH, see README.md).
  metadata = {
    enable-oslogin         = "TRUE"
    block-project-ssh-keys = "true"
    startup-script         = templatefile("${path.module}/startup.sh.tftpl", merge(local.startup, { role = "master", self_name = local.master_name }))
  }

  service_account {
    email  = google_service_account.fleet.email
    scopes = ["cloud-platform"] # what it may do is its roles'
  }

  # Compute Engine deletes the VM max_run_seconds after it starts, even with no kit left to
  # destroy it (https://cloud.google.com/compute/docs/instances/limit-vm-runtime: 30 s to 120 days,
  # for standard and Spot VMs; the deletion may come up to 30 s late).
  scheduling {
    provisioning_model          = "STANDARD"
    instance_termination_action = "DELETE"
    max_run_duration {
      seconds = local.max_run_seconds
    }
  }

  lifecycle {
    precondition {
      condition     = startswith(local.zone, "${var.region}-")
      error_message = "zone must be in region (the subnet, the master's address and Cloud NAT are regional)."
    }
  }

  # Its startup script needs the run's files, its roles and the internet (NAT) at first boot.
  depends_on = [
    google_storage_bucket_object.run,
    google_storage_bucket_object.lock,
    google_storage_bucket_iam_member.fleet,
    google_project_iam_member.fleet,
    google_compute_router_nat.this,
  ]
}

resource "google_compute_instance" "worker" {
  # checkov:skip=CKV_GCP_38: the disk holds the public Locust suite for an hour; Google-managed encryption is enough.
  for_each = local.worker_names

  project      = var.project_id
  name         = each.key
  zone         = local.zone
  machine_type = var.worker_machine_type
  tags         = [local.worker_tag]
  labels       = merge(local.labels, { role = "locust-worker" })

  boot_disk {
    initialize_params {
      image = local.image
    }
  }

  # No access_config: no external address.
  network_interface {
    subnetwork = google_compute_subnetwork.this.id
  }

  shielded_instance_config {
    enable_secure_boot          = true
    enable_vtpm                 = true
    enable_integrity_monitoring = true
  }

  metadata = {
    enable-oslogin         = "TRUE"
    block-project-ssh-keys = "true"
    startup-script         = templatefile("${path.module}/startup.sh.tftpl", merge(local.startup, { role = "worker", self_name = each.key }))
  }

  service_account {
    email  = google_service_account.fleet.email
    scopes = ["cloud-platform"]
  }

  # As the master's: deleted max_run_seconds after it starts, whatever else happens.
  scheduling {
    provisioning_model          = "STANDARD"
    instance_termination_action = "DELETE"
    max_run_duration {
      seconds = local.max_run_seconds
    }
  }

  depends_on = [
    google_storage_bucket_object.run,
    google_storage_bucket_object.lock,
    google_storage_bucket_iam_member.fleet,
    google_project_iam_member.fleet,
    google_compute_router_nat.this,
  ]
}

# --- Ending the workers ----------------------------------------------------------
# Each worker deletes its own VM once its part is over: its master quit it at the end of the test,
# the run was already over when it booted, or no master answered within boot_minutes (startup.sh.tftpl).
# Why the workers rather than the master: a worker ends itself after uploading its log, which a
# delete from the master would race, and it also ends when there is no master at all. Both need the
# same single permission, compute.instances.delete, and it is granted on the fleet's worker VMs
# only (instance-level IAM), never on the project: the fleet's account cannot touch any other VM,
# nor the master (which Compute Engine deletes at its maximum run duration, or the kit destroys).
# Master and workers share one account and one bucket already, so one worker able to end
# another adds nothing an attacker on a worker lacked. A worker does not shut down instead: a
# stopped VM keeps its disk and is never deleted by its maximum run duration (its timer stops).
resource "google_project_iam_custom_role" "end_worker" {
  project     = var.project_id
  role_id     = "visitkitLoadgenEndWorker"
  title       = "visitkit load-generator worker: delete itself"
  description = "Granted on the Locust fleet's worker VMs only, so that each deletes itself when its part of the run is over (infra/loadgen)."
  permissions = ["compute.instances.delete"]

  depends_on = [google_project_service.this]
}

resource "google_compute_instance_iam_member" "end_worker" {
  for_each = google_compute_instance.worker

  project       = var.project_id
  zone          = each.value.zone
  instance_name = each.value.name
  role          = google_project_iam_custom_role.end_worker.name
  member        = google_service_account.fleet.member
}

# --- Budget alert (optional) -------------------------------------------------------
# With billing_account set: a monthly budget on the project whose alerts (50, 90, 100 %) go to
# the billing account's administrators. It outlives nothing: `terraform destroy` removes it with
# the fleet, so it speaks when a fleet was left up, which is what it is for (billing data comes
# in hours late).
data "google_project" "this" {
  count = var.billing_account == null ? 0 : 1

  project_id = var.project_id
}

resource "google_project_service" "budgets" {
  count = var.billing_account == null ? 0 : 1

  project            = var.project_id
  service            = "billingbudgets.googleapis.com"
  disable_on_destroy = false
}

resource "google_billing_budget" "fleet" {
  count    = var.billing_account == null ? 0 : 1
  provider = google.billing

  billing_account = var.billing_account
  display_name    = "visitkit load-generator fleet (${var.project_id})"

  budget_filter {
    projects = ["projects/${data.google_project.this[0].number}"]
  }

  # In the billing account's own currency (currency_code left out).
  amount {
    specified_amount {
      units = tostring(var.budget_amount)
    }
  }

  dynamic "threshold_rules" {
    for_each = [0.5, 0.9, 1.0]
    content {
      threshold_percent = threshold_rules.value
    }
  }

  depends_on = [google_project_service.budgets]
}
