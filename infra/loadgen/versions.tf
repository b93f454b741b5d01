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
