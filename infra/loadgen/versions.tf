terraform {
  # mock_provider and `command = plan` in tests need 1.7; OpenTofu 1.8+ reads this too.
  required_version = ">= 1.7"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = "6.50.0"
    }
  }
}

provider "google" {
  project = var.project_id
  region  = var.region
}

# For the optional budget alone: billingbudgets.googleapis.com refuses a user's Application Default
# Credentials without a quota project ("The billingbudgets.googleapis.com API requires a quota
# project, which is not set by default"), so this provider bills its calls to the fleet's project.
provider "google" {
  alias                 = "billing"
  project               = var.project_id
  region                = var.region
  user_project_override = true
  billing_project       = var.project_id
}
