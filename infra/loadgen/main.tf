locals {
  zone = coalesce(var.zone, "${var.region}-a")

  # One subnet of the fleet's own network: room for the master and 100 workers.
  subnet_cidr = "10.10.0.0/24"
  # The master's fixed internal address (.0, .1 and the last two are Google's), known when
  # planning, so the workers' template can name it before the master exists.
  master_ip = cidrhost(local.subnet_cidr, 2)

  master_tag = "visitkit-locust-master"
  worker_tag = "visitkit-locust-worker"

  # The only source of SSH: Identity-Aware Proxy's TCP forwarding range (Google's IAP documentation).
  iap_range = "35.235.240.0/20"

  # The Locust worker processes the master waits for before it starts the test.
  expect_workers = var.workers * var.processes_per_worker

  # What the kit staged, less Python's caches.
  run_files = toset([for f in fileset(var.run_dir, "**") : f if length(regexall("(^|/)__pycache__/|\\.pyc$", f)) == 0])

  # Debian 12 images have the gcloud CLI and Python 3.11 (the startup script adds python3-venv).
  image = "debian-cloud/debian-12"

  startup = {
    bucket         = google_storage_bucket.run.name
    master_host    = google_compute_address.master.address
    master_port    = var.master_port
    expect_workers = local.expect_workers
    processes      = var.processes_per_worker
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
  name         = "visitkit-locust-master"
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
    startup-script         = templatefile("${path.module}/startup.sh.tftpl", merge(local.startup, { role = "master" }))
  }

  service_account {
    email  = google_service_account.fleet.email
    scopes = ["cloud-platform"] # what it may do is its roles'
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
    google_storage_bucket_iam_member.fleet,
    google_project_iam_member.fleet,
    google_compute_router_nat.this,
  ]
}

resource "google_compute_instance_template" "worker" {
  project      = var.project_id
  name_prefix  = "visitkit-locust-worker-"
  machine_type = var.worker_machine_type
  tags         = [local.worker_tag]
  labels       = merge(local.labels, { role = "locust-worker" })

  disk {
    source_image = local.image
    boot         = true
    auto_delete  = true
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
    startup-script         = templatefile("${path.module}/startup.sh.tftpl", merge(local.startup, { role = "worker" }))
  }

  service_account {
    email  = google_service_account.fleet.email
    scopes = ["cloud-platform"]
  }

  # Templates cannot change in place: the group moves to the new one before the old goes.
  lifecycle {
    create_before_destroy = true
  }
}

resource "google_compute_instance_group_manager" "workers" {
  project            = var.project_id
  name               = "visitkit-locust-workers"
  zone               = local.zone
  base_instance_name = "visitkit-locust-worker"
  target_size        = var.workers

  version {
    instance_template = google_compute_instance_template.worker.self_link_unique
  }

  depends_on = [
    google_storage_bucket_object.run,
    google_storage_bucket_iam_member.fleet,
    google_project_iam_member.fleet,
    google_compute_router_nat.this,
  ]
}
