# --- APIs ----------------------------------------------------------------------

locals {
  # Every API a resource of this module needs. cloudresourcemanager serves the project's IAM
  # policy and data.google_project; it is off in some new projects.
  services = toset(concat([
    "artifactregistry.googleapis.com",
    "cloudbuild.googleapis.com",
    "cloudfunctions.googleapis.com",
    "cloudresourcemanager.googleapis.com",
    "firestore.googleapis.com",
    "iam.googleapis.com",
    # iamcredentials mints the load generator's ID tokens when a user acts as a service account.
    "iamcredentials.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "pubsub.googleapis.com",
    "run.googleapis.com",
    "storage.googleapis.com",
    ],
    # The load balancer, Cloud Armor and the address are Compute Engine resources.
    local.edge ? ["compute.googleapis.com"] : [],
  ))
}

resource "google_project_service" "this" {
  for_each = local.services

  project = var.project_id
  service = each.value
  # Other things in the project may use these APIs: destroy leaves them on.
  disable_on_destroy = false
}
